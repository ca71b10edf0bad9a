"""The serving controller's pure core: which Services and PodDisruptionBudget a component
wants, and the writes that bring the cluster there.

Cached JSON in (:mod:`.observe` makes the models of :mod:`.model`), writes out
(:mod:`.actions`, decided by :mod:`.decide`). No I/O, no clock, no logging: an import-linter
contract keeps them out.
"""
