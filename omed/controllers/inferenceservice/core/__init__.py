"""The InferenceService controller's decisions, pure: models in, a :class:`~.actions.Decision`
out.

Everything here is a function of its arguments. Time comes in as values (``now`` for the
timestamps written, ``monotonic`` for the pacing), and the one thing remembered between passes,
when each InferenceService's status was last written, comes in as a
:class:`~.pacing.PaceMemory` and goes out as the decision's. So the rules (what to create,
patch, delete, when a status write may wait) are tested in milliseconds, with hypothesis
among others, and the shell (:mod:`..shell`) only reads the caches, does the writes and reports
them. An import-linter contract keeps this package free of I/O, logging, clocks and the shell.
"""
