"""Durable Instance operations: how they start, which step they are at, when they end.

Why: a manager can die between any two lines, so an Instance's multi-step work lives in its
row (``operation``), written before the first side effect, and every step is chosen again
from what is observed. Each function here is pure: it reads an operation and the Instance's
pods and returns the operation's next state.

Create: ``CreatePods`` (some slot has no pod yet; the missing pods are created in whole,
possibly over several passes when the budget defers the Instance) -> ``WaitReady`` (every
pod exists) -> done when the Instance is Ready. A Create whose pods vanish goes back to
``CreatePods``.

Delete: ``Drain`` (gates are set False; wait until no pod is routed: Ready False and gate
not True on every live pod) -> ``DeletePods`` (all live pods are deleted together) ->
``WaitPodsGone`` (every pod is Terminating) -> done when no pod is left. A Delete is never
abandoned: a Delete of an Instance that is wanted again finishes, and the Instance comes
back as a new incarnation.

Operation ids are ``<type>-<index>-<incarnation>-<stamp>``, the stamp being the pass's time
in microseconds (hex): unique per Instance and pass, deterministic for the planner, and
recorded on the pods the operation creates.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from omed.api.inferencereplica import Operation, OperationType
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.model import PodView


def operation_id(*, type: OperationType, index: int, incarnation: int, now: dt.datetime) -> str:
    stamp = int(now.timestamp() * 1_000_000)
    return f"{type.lower()}-{index}-{incarnation}-{stamp:x}"


def pass_stamp(op_id: str) -> str:
    """The pass part of an operation id (what groups one pass's operations)."""
    return op_id.rpartition("-")[2]


def start(
    *,
    type: OperationType,
    index: int,
    incarnation: int,
    step: str,
    reason: names.OperationReason,
    target_revision: str | None,
    now: dt.datetime,
) -> Operation:
    return Operation(
        id=operation_id(type=type, index=index, incarnation=incarnation, now=now),
        type=type,
        step=step,
        started_at=now,
        last_progress_at=now,
        target_revision=target_revision,
        reason=reason,
    )


def at_step(op: Operation, step: str, now: dt.datetime) -> Operation:
    """``op`` at ``step``; progress time moves only when the step changes."""
    if op.step == step:
        return op
    return op.model_copy(update={"step": step, "last_progress_at": now})


def is_delete(op: Operation | None) -> bool:
    return op is not None and op.type == "Delete"


def is_create(op: Operation | None) -> bool:
    return op is not None and op.type == "Create"


@dataclass(frozen=True, slots=True)
class Drain:
    """Where draining an Instance's pods stands."""

    gate_off: tuple[PodView, ...]
    """Live pods whose gate must be set False (True now, or absent on a Ready pod)."""
    routed: tuple[PodView, ...]
    """Live pods Services may still route to: Ready True, or gate True."""
    live: tuple[PodView, ...]

    @property
    def deletable(self) -> bool:
        """Every live pod may be deleted now (and there is at least one)."""
        return bool(self.live) and not self.routed


def drain_state(pods: Sequence[PodView]) -> Drain:
    live = tuple(pod for pod in pods if not pod.terminating)
    return Drain(
        gate_off=tuple(
            pod for pod in live if pod.serving is True or (pod.serving is None and pod.ready)
        ),
        routed=tuple(pod for pod in live if pod.routed),
        live=live,
    )


def delete_step(pods: Sequence[PodView]) -> str | None:
    """The step a Delete is at for these pods; None when none is left (done)."""
    if not pods:
        return None
    state = drain_state(pods)
    if not state.live:
        return names.STEP_WAIT_PODS_GONE
    return names.STEP_DELETE_PODS if state.deletable else names.STEP_DRAIN
