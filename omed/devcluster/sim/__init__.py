"""The node simulator's parts: pure cores (quantities, selectors, scheduling predicates, the
kubelet's per-pod state machine, failure plans) and the small I/O helpers (list+watch, timed
wake-ups) that :mod:`omed.devcluster.simulator` composes.

The pure modules take plain pod and node dicts and explicit times, so they are unit-tested
without an API server; only :mod:`.watch` and :mod:`omed.devcluster.simulator` do I/O. Nothing
here imports :mod:`omed.informers`: the simulator stands in for the cluster the product runs
against, so it must not share the product's caching code (a bug there would hide itself).
"""
