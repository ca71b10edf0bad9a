"""Which version of its runtime an InferenceService renders from: the live spec, or a pinned
runtime revision (upstream OME's ``autoSync``, ``spec.runtime.revision`` and the
``ome.io/runtime-sync`` annotation).

Rules (:func:`resolve`), for the runtime revisions of the runtime the service resolves to:

* ``spec.runtime.autoSync`` unset or true: the live spec; no pin is stored
  (``status.pinnedRevisionName`` is emptied) and no RuntimeDrifted condition is kept.
* ``autoSync: false`` with ``spec.runtime.revision``: exactly that revision. It overrides
  drift (RuntimeDrifted False, ``RevisionPinned``); missing, RuntimeDrifted True with
  ``RevisionMissing`` and nothing is rendered (no fall-back to the live spec).
* ``autoSync: false`` otherwise, the pin in ``status.pinnedRevisionName``:

  - none yet: the revision of the live spec, once the revision cache has it (until then the
    live spec, which is its content, without a pin);
  - the ``ome.io/runtime-sync`` annotation set to a value other than
    ``status.lastRuntimeSyncToken``: the pin moves to the revision of the live spec (once the
    cache has it) and the token is stored, so the same value moves it once;
  - the pin's revision gone from the cache: RuntimeDrifted True, ``RevisionMissing``, and
    nothing is rendered;
  - the live spec differs from the pinned revision's: RuntimeDrifted True,
    ``RevisionMismatch``, and the pinned spec is rendered (pods keep running what they run);
    else RuntimeDrifted False, ``RevisionMatched``. Specs are compared by upstream's content
    hash (:func:`omed.api.runtimehash.content_hash`), as upstream compares them, not by
    names or bytes: a pin on a revision of the same spec under another name (one omed named
    before it used upstream's hash) is in sync, and so is a revision whose ``data`` upstream
    wrote as Go's bytes (zero fields spelled out).

The live spec's revision is named as the runtime revision controller names it
(:mod:`omed.controllers.runtimerevision.core.snapshot`): the same content hash of the spec
as stored. Pure: the cache's revisions and the service's fields in, the decision out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from omed.api.constants import ANNOTATION_RUNTIME_SYNC
from omed.api.runtimehash import content_hash

CONDITION_RUNTIME_DRIFTED: Final = "RuntimeDrifted"
EVENT_RUNTIME_DRIFTED: Final = "RuntimeDrifted"
REASON_REVISION_MISMATCH: Final = "RevisionMismatch"
REASON_REVISION_MISSING: Final = "RevisionMissing"
REASON_REVISION_MATCHED: Final = "RevisionMatched"
REASON_REVISION_PINNED: Final = "RevisionPinned"

STATUS_PINNED: Final = "pinnedRevisionName"
STATUS_TOKEN: Final = "lastRuntimeSyncToken"


@dataclass(frozen=True, slots=True)
class PinInput:
    """What the pin is decided from: the service's fields as stored, and the runtime."""

    auto_sync: bool = True
    explicit: str | None = None
    """``spec.runtime.revision``."""
    pinned: str | None = None
    """``status.pinnedRevisionName``."""
    token: str | None = None
    """The ``ome.io/runtime-sync`` annotation."""
    last_token: str | None = None
    """``status.lastRuntimeSyncToken``."""
    runtime: str = ""
    """``<kind>/<name>`` (``ServingRuntime/ns/name``) of the runtime, for messages."""
    live: Mapping[str, Any] | None = None
    """The live runtime's spec as stored (None: no runtime found)."""
    live_revision: str | None = None
    """The name the live spec's revision has (or will have)."""
    live_hash: str | None = None
    """The live spec's content hash, when the caller has it (else it is computed)."""
    revisions: Mapping[str, Mapping[str, Any]] | None = None
    """The cached runtime revisions by name -> their ``data`` (the spec). None: no revision
    cache (pins are not followed: the live spec, as without a pin)."""


@dataclass(frozen=True, slots=True)
class Drift:
    drifted: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Pin:
    """What the service renders from and what its status says of the pin."""

    source: Literal["live", "revision", "missing"]
    spec: Mapping[str, Any] | None
    """The runtime spec to render from (None with ``missing``, or without a runtime)."""
    pinned: str | None = None
    """``status.pinnedRevisionName`` to store (None: empty)."""
    last_token: str | None = None
    """``status.lastRuntimeSyncToken`` to store (None: as stored, or none)."""
    drift: Drift | None = None
    """The RuntimeDrifted condition (None: none)."""
    waiting: bool = False
    """A pin waits for the revision cache to show the live spec's revision."""

    def status_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {STATUS_PINNED: self.pinned or ""}
        if self.last_token is not None:
            fields[STATUS_TOKEN] = self.last_token
        return fields


LIVE: Final = "live"


def _missing(given: PinInput, name: str, *, pinned: str | None) -> Pin:
    message = (
        f"runtime revision {name} of {given.runtime} does not exist; nothing is rendered "
        "until it is restored or the pin is changed"
    )
    return Pin(
        source="missing",
        spec=None,
        pinned=pinned,
        last_token=given.last_token,
        drift=Drift(True, REASON_REVISION_MISSING, message),
    )


def resolve(given: PinInput) -> Pin:
    """The pin of one pass; see the module docstring."""
    if given.auto_sync or given.revisions is None:
        return Pin(source="live", spec=given.live, last_token=given.last_token)
    revisions = given.revisions
    if given.explicit:
        data = revisions.get(given.explicit)
        if data is None:
            return _missing(given, given.explicit, pinned=given.explicit)
        return Pin(
            source="revision",
            spec=data,
            pinned=given.explicit,
            last_token=given.last_token,
            drift=Drift(
                False,
                REASON_REVISION_PINNED,
                f"pinned to runtime revision {given.explicit} by spec.runtime.revision",
            ),
        )
    live_ready = given.live_revision is not None and given.live_revision in revisions
    pinned, token = given.pinned, given.last_token
    sync = bool(given.token) and given.token != given.last_token
    waiting = False
    if (not pinned or sync) and given.live is not None:
        if live_ready:
            pinned = given.live_revision
            if sync:
                token = given.token
        elif not pinned:
            # The live spec is the content its revision will have: render it, pin it once
            # the revision controller has written it.
            return Pin(source="live", spec=given.live, last_token=token, waiting=True)
        else:
            waiting = True  # the roll forward waits for the snapshot of the live spec
    if not pinned:
        return Pin(source="live", spec=given.live, last_token=token)
    data = revisions.get(pinned)
    if data is None:
        return _missing(given, pinned, pinned=pinned)
    live_hash = None if given.live is None else given.live_hash or content_hash(given.live)
    if live_hash is not None and content_hash(data) != live_hash:
        drift = Drift(
            True,
            REASON_REVISION_MISMATCH,
            f"{given.runtime} changed: its spec is runtime revision {given.live_revision}, "
            f"the service is pinned to {pinned}; set the {ANNOTATION_RUNTIME_SYNC} annotation "
            "to a new value to roll forward",
        )
    else:
        drift = Drift(False, REASON_REVISION_MATCHED, f"pinned to runtime revision {pinned}")
    return Pin(
        source="revision",
        spec=data,
        pinned=pinned,
        last_token=token,
        drift=drift,
        waiting=waiting,
    )


__all__ = [
    "CONDITION_RUNTIME_DRIFTED",
    "EVENT_RUNTIME_DRIFTED",
    "REASON_REVISION_MATCHED",
    "REASON_REVISION_MISMATCH",
    "REASON_REVISION_MISSING",
    "REASON_REVISION_PINNED",
    "Drift",
    "Pin",
    "PinInput",
    "resolve",
]
