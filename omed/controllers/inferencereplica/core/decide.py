"""The one entry of the core: what one pass over one InferenceReplica does.

Why one function: the shell must not decide. Everything a pass decides, the plan itself
(:mod:`.plan`), the finalizer before an adoption (:mod:`.orphans`), a write that only
converts the stored form (:mod:`.conversion`), a status write held back by the pace
(:mod:`.pacing`), is decided here from one :class:`PassInput`, whose clock reading and
per-key memory are values; the memory comes back updated in the :class:`Decision`. After
the shell has carried the plan out, :func:`settle` folds what happened into the memory and
says when to look again.

Invariant: :func:`decide` and :func:`settle` are pure; the same input gives the same
decision, so the property tests drive whole passes, pacing and conversion included, with
the clock as an input.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import (
    REFUSED_RETRY,
    RETRY_SOON,
    CreatePods,
    Plan,
)
from omed.controllers.inferencereplica.core.conversion import StoredForm, convert
from omed.controllers.inferencereplica.core.escalation import escalate
from omed.controllers.inferencereplica.core.memory import KeyMemory
from omed.controllers.inferencereplica.core.model import (
    CreateRefusal,
    ObservedState,
    PlanSettings,
    ReplicaTarget,
)
from omed.controllers.inferencereplica.core.nodes import with_node_facts
from omed.controllers.inferencereplica.core.orphans import finalizer_first
from omed.controllers.inferencereplica.core.pacing import pace
from omed.controllers.inferencereplica.core.plan import plan
from omed.controllers.refusedwrite import RefusedWrite


@dataclass(frozen=True, kw_only=True)
class PassInput:
    """Everything one pass decides from."""

    target: ReplicaTarget
    observed: ObservedState
    settings: PlanSettings
    now: dt.datetime
    """The pass's wall-clock time (operation ids, deadlines, transition times)."""
    monotonic: float
    """The clock's monotonic reading, on which the status pace is counted."""
    busy: bool = False
    """The controller has more work than workers (the longer pace)."""
    memory: KeyMemory = dataclasses.field(default_factory=KeyMemory)
    stored: StoredForm
    """How the status is stored, for the conversion check."""
    adoptable: bool = False
    """Cached pods no controller owns wait to be adopted by this replica."""


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What the shell carries out, and the memory to keep for the next pass."""

    plan: Plan
    memory: KeyMemory


def decide(given: PassInput) -> Decision:
    """One pass's decision; see the module docstring."""
    memory = given.memory
    observed = given.observed
    if memory.refused or memory.write_refused is not None:
        observed = dataclasses.replace(
            observed, refused=dict(memory.refused), write_refused=memory.write_refused
        )
    if memory.removed_requests:
        observed, memory = _without_removed(observed, memory)
    observed = with_node_facts(observed)
    target = given.target
    if given.adoptable and not target.has_finalizer:
        decided = finalizer_first(observed)
    else:
        decided = plan(target=target, observed=observed, settings=given.settings, now=given.now)
    if not target.orphaning:  # an Orphan deletion writes nothing but the finalizer's patch
        decided, memory = convert(decided, observed=observed, stored=given.stored, memory=memory)
    decided = pace(
        decided, last_write=memory.last_status_write, now=given.monotonic, busy=given.busy
    )
    if not (given.adoptable and not target.has_finalizer):
        # After the pace, which may hold the status write and its events back: what the
        # escalation reports must go out in this pass, as its memory says it did.
        decided, memory = escalate(
            decided, target=target, observed=observed, memory=memory, now=given.now
        )
    return Decision(plan=decided, memory=memory)


def _without_removed(observed: ObservedState, memory: KeyMemory) -> tuple[ObservedState, KeyMemory]:
    """The mailbox without the requests this manager has removed, which a cache that hasn't
    seen the removal still shows; a key the cache shows gone is forgotten (no mailbox: the
    parent isn't cached, and nothing is removed without one)."""
    mailbox = observed.mailbox
    if mailbox is None:
        return observed, dataclasses.replace(memory, removed_requests=frozenset())
    shown = {request.key for request in mailbox.requests}
    still = memory.removed_requests & shown
    if still != memory.removed_requests:
        memory = dataclasses.replace(memory, removed_requests=still)
    if not still:
        return observed, memory
    kept = tuple(request for request in mailbox.requests if request.key not in still)
    mailbox = dataclasses.replace(mailbox, requests=kept)
    return dataclasses.replace(observed, mailbox=mailbox), memory


@dataclass(frozen=True, kw_only=True)
class PassReport:
    """What carrying a plan out came to, as far as the core decides with it."""

    stopped: str | None = None
    """``conflict``, ``gone``, ``too_large`` or ``refused`` when the pass stopped early."""
    status_stored: bool = False
    refused: Mapping[int, CreateRefusal] = dataclasses.field(default_factory=dict)
    """Instance index -> a create refused for a reason that holds the operation."""
    write_refused: Sequence[RefusedWrite] = ()
    """The first refused write of each kind (verb and resource), as reported."""
    retry_soon: bool = False
    monotonic: float = 0.0
    """The clock's monotonic reading when the plan was carried out."""
    removed_requests: tuple[str, ...] = ()
    """The migration request annotations the pass removed from the parent InferenceService."""


@dataclass(frozen=True, kw_only=True)
class Settled:
    """The memory after a pass, and when to look again."""

    memory: KeyMemory
    requeue_after: float | None = None
    backoff: bool = False
    """Look again through the workqueue's per-key back-off, not a timer (a refusal)."""


def settle(memory: KeyMemory, decided: Plan, report: PassReport) -> Settled:
    """Fold ``report`` into ``memory`` and choose the next look for a pass that ran through
    (the shell maps ``conflict``, ``gone`` and errors itself).

    A refused create is kept per Instance while its operation lasts and no new create of it
    was tried; a new one asks for a look in :data:`RETRY_SOON` (to record its token), one
    that lasts every :data:`REFUSED_RETRY`. A refused write shows as condition
    WriteRefused from the next status write (never the status write's own: that write can't
    carry it) and backs off; a pass that completes without one forgets it, and a look soon
    removes the condition. Request annotations the pass removed are remembered until the
    cache shows them gone (:func:`_without_removed`)."""
    before = memory
    if report.status_stored:
        memory = memory.status_written(report.monotonic)
    if report.removed_requests:
        memory = memory.requests_removed(report.removed_requests)
    memory, fresh = _remember_creates(memory, decided, report)
    if report.write_refused:
        shown = next((r for r in report.write_refused if r.resource != names.RESOURCE_STATUS), None)
        if shown is not None:
            memory = dataclasses.replace(memory, write_refused=shown)
        return Settled(memory=memory, backoff=True)
    if report.stopped is None:
        memory = dataclasses.replace(memory, write_refused=None)
    delays = [d for d in (decided.requeue_after,) if d is not None]
    if report.retry_soon:
        delays.append(RETRY_SOON)
    if before.write_refused is not None and memory.write_refused is None:
        delays.append(RETRY_SOON)  # the condition this pass's status carried goes soon
    if report.refused:
        delays.append(RETRY_SOON if fresh else REFUSED_RETRY)
    return Settled(memory=memory, requeue_after=min(delays) if delays else None)


def _remember_creates(
    memory: KeyMemory, decided: Plan, report: PassReport
) -> tuple[KeyMemory, bool]:
    """The refused creates kept for the next pass, and whether one is new (its token isn't
    in the rows yet)."""
    if report.stopped is not None:
        return memory, False
    old = memory.refused
    kept: dict[int, CreateRefusal] = {}
    if old:  # (a look at every row only when there is a refusal to keep)
        held = {row.index for row in decided.rows if row.operation is not None}
        attempted = {create.index for create in decided.of_type(CreatePods)}
        kept = {i: r for i, r in old.items() if i in held and i not in attempted}
    kept.update(report.refused)
    fresh = any(
        old.get(index) is None or old[index].token != refusal.token
        for index, refusal in report.refused.items()
    )
    return dataclasses.replace(memory, refused=kept), fresh
