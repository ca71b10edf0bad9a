"""Bounded batches of whole Instances ("Pace OMENative scale-ups and scale-downs").

Why: the batch rules are few and exact, and every one of them is a number a user can check
in the ``OMENative scale-down wave`` log line. Small pure functions let the unit tests pin
each rule to its figures.

The rules, as implemented:

* a batch is made of whole Instances, taken in order; the first one may exceed the budget
  and then proceeds alone; the batch stops at the first Instance that doesn't fit (later,
  smaller Instances don't jump the queue);
* no budget (``None``) means everything at once;
* on a scale-down an Instance costs its remaining pods, live and Terminating alike, and 1
  when they are gone but its Delete operation (its cleanup) still runs;
* a percentage is resolved on every pass against the footprint, the summed cost of the
  component's Instances, rounded up and never below 1 (:func:`omed.config.resolve_budget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from omed.config import BatchSize, resolve_budget

__all__ = ["Candidate", "delete_cost", "resolve_budget", "take_batch"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """An Instance waiting for a batch, and what it costs."""

    index: int
    cost: int


def delete_cost(pods: int, *, cleanup_running: bool) -> int:
    """What an Instance costs a scale-down pass: its pods, or 1 while only cleanup is left."""
    if pods > 0:
        return pods
    return 1 if cleanup_running else 0


def take_batch(
    candidates: Sequence[Candidate], budget: int | None
) -> tuple[tuple[Candidate, ...], tuple[Candidate, ...]]:
    """Split ``candidates`` (in priority order) into this pass's batch and the deferred rest."""
    if budget is None:
        return tuple(candidates), ()
    spent = 0
    for position, candidate in enumerate(candidates):
        if position > 0 and spent + candidate.cost > budget:
            return tuple(candidates[:position]), tuple(candidates[position:])
        spent += candidate.cost
    return tuple(candidates), ()


def budget_of(configured: BatchSize | None, footprint: int) -> int | None:
    """The pod budget of one pass (``None``: unbounded)."""
    return resolve_budget(configured, footprint)
