"""What the core decides from: the observed objects as models, the settings, the time, and
what this pass's writes have come back with so far.

A pass is a short sequence of decisions (:func:`.decide.decide`): the finalizer first, then the
InferenceReplicas, then the status. The writes of each decision come back to the next as a
:class:`Progress` (a value the shell builds from the API server's answers), so what the status
says can depend on what was written, and refused, in the same pass, while every rule stays
here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Literal

from omed.api.inferencereplica import InferenceReplica
from omed.api.inferenceservice import InferenceService
from omed.api.servingruntime import ServingRuntimeSpec
from omed.controllers.inferenceservice.core.pacing import Pace, PaceMemory
from omed.controllers.inferenceservice.core.pinning import Pin
from omed.controllers.refusedwrite import RefusedWrite, first_of_each_kind


def first_refusal(refusals: tuple[RefusedWrite, ...]) -> RefusedWrite | None:
    """The refusal a condition shows: the first of the first kind (by verb, resource and
    name, so a repeat of the same pass shows the same one)."""
    shown = first_of_each_kind(refusals)
    return shown[0] if shown else None


@dataclasses.dataclass(frozen=True)
class Observed:
    """The caches' view of one InferenceService at the start of a pass."""

    service: InferenceService
    runtime: ServingRuntimeSpec | None
    """The spec of the runtime ``spec.runtime`` names, when the caches have it (its metadata
    is never read)."""
    replicas: Mapping[str, InferenceReplica]
    """InferenceReplicas by name: those of the projected names and the fronted ones the
    caches have."""
    owned: tuple[InferenceReplica, ...]
    """InferenceReplicas whose owner references name the service's uid."""
    default_mode: str | None
    """``deploy.defaultDeploymentMode`` of the inferenceservice-config ConfigMap."""
    pin: Pin | None = None
    """Which version of the runtime ``runtime`` is (:mod:`.pinning`); None: pins aren't
    followed (no revision cache), and the status says nothing of them."""


@dataclasses.dataclass(frozen=True)
class Settings:
    pace: Pace
    """How long an informational status write may wait."""
    deletion_poll: float
    """Seconds between looks at replicas being drained during a deletion."""


@dataclasses.dataclass(frozen=True)
class Moment:
    """The time of the pass, as values."""

    now: dt.datetime
    """Wall time, for the timestamps written."""
    monotonic: float
    """Monotonic seconds, for the pacing."""
    busy: bool
    """Whether the controller has more work than workers (the busy pace)."""


FinalizerOutcome = Literal["added", "refused", "gone", "held", "released"]
"""What a finalizer write came to: added (and the pass goes on with the returned service),
refused, gone (the service is gone), held (a fresh list still shows an owned replica, so it
wasn't removed), released."""
Stop = Literal["requeue", "poll"]
"""A replica write that ends the pass: requeue (Conflict or NotFound: the caches are behind),
poll (an adoption a fresh read refused: the service is going away)."""
StatusOutcome = Literal["written", "failed"]


@dataclasses.dataclass(frozen=True)
class Progress:
    """What this pass's writes have come back with so far (empty at the start)."""

    service: InferenceService | None = None
    """The service as the finalizer patch returned it (the pass goes on with it)."""
    finalizer: FinalizerOutcome | None = None
    replicas_done: bool = False
    """The replica writes were done (or stopped: :attr:`stop`)."""
    written: Mapping[str, InferenceReplica] = dataclasses.field(default_factory=dict)
    """Replicas as a patch or an adoption of this pass returned them, by name."""
    stop: Stop | None = None
    deletes_done: bool = False
    status: StatusOutcome | None = None
    refusals: tuple[RefusedWrite, ...] = ()
    """Refused writes, in the order met."""


@dataclasses.dataclass(frozen=True)
class DecideInput:
    """The one argument of :func:`.decide.decide`."""

    observed: Observed
    settings: Settings
    moment: Moment
    memory: PaceMemory
    progress: Progress = dataclasses.field(default_factory=Progress)
