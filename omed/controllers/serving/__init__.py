"""The serving controller: the Services and the PodDisruptionBudget of each OMENative component.

Keyed by InferenceReplica (one component), it keeps the objects through which the component
is reached and protected: the traffic Service ``{isvc}-{comp}``, the headless
``{isvc}-{comp}-headless`` (peer DNS), one Service pair ``{isvc}-{comp}-rev-{hash}`` and
``...-headless`` per revision its pods run, and the PodDisruptionBudget ``{isvc}-{comp}``.
Each is controlled by the InferenceReplica, so the garbage collector removes it with it.

:mod:`.core` decides (cached JSON in, writes out, purely); :mod:`.shell` reads the caches and
does the writes. This module imports neither, so the core is importable without the shell's
dependencies. docs/controllers.md (*Serving controller*) describes every rule.
"""
