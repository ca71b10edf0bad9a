"""One module per kind of Instance operation: how each is started and driven, step by step.

Every operation is recorded in the Instance's row before its first side effect
(:mod:`..operations`), and each pass chooses its next step again from what it observes; the
steps several kinds share live in :mod:`..steps`.
"""
