"""The InferenceReplica controller: the Instances of one OMENative component.

Two subpackages, one rule. :mod:`.core` decides: it takes what a pass observed (models built
from the caches, the per-key memory, the clock's reading) and returns a decision (actions,
new rows, the memory updated), and it imports no I/O. :mod:`.shell` does: it reads the
caches, calls the core, and carries out what it decided, in the one safe order, through the
API client, the event recorder, the logs and the metrics. docs/controllers.md describes
every rule.

Invariant of the package: every multi-step Instance operation is recorded in the Instance's
row before its first side effect, so a manager killed at any point resumes it, without a
duplicate pod and without losing a delete. This module imports neither subpackage, so the
core can be imported without the shell's dependencies.
"""
