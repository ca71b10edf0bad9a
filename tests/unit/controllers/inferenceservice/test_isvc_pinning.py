"""Which version of its runtime an InferenceService renders from (autoSync, an explicit
revision, the runtime-sync annotation), decided purely."""

from __future__ import annotations

from typing import Any

from isvc_world import NOW, service

from omed.api.inferenceservice import InferenceService
from omed.controllers.inferenceservice.core.pinning import (
    CONDITION_RUNTIME_DRIFTED,
    REASON_REVISION_MATCHED,
    REASON_REVISION_MISMATCH,
    REASON_REVISION_MISSING,
    REASON_REVISION_PINNED,
    PinInput,
    resolve,
)
from omed.controllers.inferenceservice.core.status import build_status

OLD: dict[str, Any] = {"engineConfig": {"runner": {"image": "srt:1.0"}}}
NEW: dict[str, Any] = {"engineConfig": {"runner": {"image": "srt:2.0"}}}
REVISIONS = {"cr-srt-old": OLD, "cr-srt-new": NEW}


def pinned(**fields: Any) -> PinInput:
    base: dict[str, Any] = {
        "auto_sync": False,
        "runtime": "ClusterServingRuntime srt",
        "live": NEW,
        "live_revision": "cr-srt-new",
        "revisions": REVISIONS,
    }
    return PinInput(**{**base, **fields})


def test_auto_sync_renders_the_live_spec_and_stores_no_pin() -> None:
    pin = resolve(pinned(auto_sync=True, pinned="cr-srt-old"))
    assert (pin.source, pin.spec, pin.pinned, pin.drift) == ("live", NEW, None, None)
    assert pin.status_fields() == {"pinnedRevisionName": ""}


def test_the_first_pin_is_the_live_specs_revision_once_it_exists() -> None:
    pin = resolve(pinned())
    assert (pin.source, pin.spec, pin.pinned) == ("revision", NEW, "cr-srt-new")
    assert pin.drift is not None and not pin.drift.drifted
    assert pin.drift.reason == REASON_REVISION_MATCHED
    before = resolve(pinned(revisions={"cr-srt-old": OLD}))
    assert (before.source, before.spec, before.pinned, before.waiting) == ("live", NEW, None, True)


def test_a_runtime_edit_drifts_and_the_pinned_spec_stays() -> None:
    pin = resolve(pinned(pinned="cr-srt-old"))
    assert (pin.source, pin.spec, pin.pinned) == ("revision", OLD, "cr-srt-old")
    assert pin.drift is not None and pin.drift.drifted
    assert pin.drift.reason == REASON_REVISION_MISMATCH
    assert "ClusterServingRuntime srt changed" in pin.drift.message
    assert "ome.io/runtime-sync" in pin.drift.message


def test_a_new_sync_token_moves_the_pin_once() -> None:
    moved = resolve(pinned(pinned="cr-srt-old", token="1"))
    assert (moved.spec, moved.pinned, moved.last_token) == (NEW, "cr-srt-new", "1")
    assert moved.drift is not None and not moved.drift.drifted
    # The same token, stored, moves nothing: the pin drifts again after another edit.
    again = resolve(
        pinned(pinned="cr-srt-new", token="1", last_token="1", live={"x": 1}, live_revision="x")
    )
    assert (again.pinned, again.spec, again.last_token) == ("cr-srt-new", NEW, "1")
    assert again.drift is not None and again.drift.drifted
    waiting = resolve(pinned(pinned="cr-srt-old", token="2", revisions={"cr-srt-old": OLD}))
    assert (waiting.pinned, waiting.last_token, waiting.waiting) == ("cr-srt-old", None, True)


def test_an_explicit_revision_wins_and_a_missing_one_renders_nothing() -> None:
    pin = resolve(pinned(explicit="cr-srt-old", pinned="cr-srt-new"))
    assert (pin.spec, pin.pinned) == (OLD, "cr-srt-old")
    assert pin.drift is not None and pin.drift.reason == REASON_REVISION_PINNED
    missing = resolve(pinned(explicit="cr-srt-gone"))
    assert (missing.source, missing.spec) == ("missing", None)
    assert missing.drift is not None and missing.drift.drifted
    assert missing.drift.reason == REASON_REVISION_MISSING
    gone = resolve(pinned(pinned="cr-srt-gone"))
    assert gone.source == "missing" and gone.pinned == "cr-srt-gone"


def test_without_a_revision_cache_pins_are_not_followed() -> None:
    pin = resolve(pinned(pinned="cr-srt-old", revisions=None))
    assert (pin.source, pin.spec) == ("live", NEW)


def test_drift_is_judged_by_content_not_by_name() -> None:
    """A pin on a revision of the live spec under another name (upstream's hash) is in sync."""
    pin = resolve(pinned(pinned="r-upstream-hash", revisions={**REVISIONS, "r-upstream-hash": NEW}))
    assert (pin.pinned, pin.spec) == ("r-upstream-hash", NEW)
    assert pin.drift is not None and not pin.drift.drifted


def test_a_pin_on_a_legacy_named_or_go_written_revision_of_the_live_spec_is_in_sync() -> None:
    # A revision omed named before it used upstream's hash, holding the spec as stored, and one
    # upstream wrote, holding Go's bytes (zero fields spelled out): both are the live spec.
    go_written = {
        "engineConfig": {"runner": {"name": "", "image": "srt:2.0", "resources": {}}},
        "containers": None,
    }
    revisions = {"cr-srt-44136fa3": NEW, "cr-srt-upstream": go_written, **REVISIONS}
    for name in ("cr-srt-44136fa3", "cr-srt-upstream"):
        pin = resolve(pinned(pinned=name, revisions=revisions))
        assert pin.pinned == name
        assert pin.drift is not None
        assert (pin.drift.drifted, pin.drift.reason) == (False, REASON_REVISION_MATCHED)
    pin = resolve(pinned(pinned="cr-srt-old", revisions=revisions))
    assert pin.drift is not None and pin.drift.reason == REASON_REVISION_MISMATCH


def test_the_status_carries_the_pin_and_writes_nothing_for_a_service_never_pinned() -> None:
    body = service({"engine": 1})
    live = InferenceService.model_validate(body)
    unpinned = build_status(isvc=live, components=[], pin=resolve(pinned(auto_sync=True)), now=NOW)
    assert "pinnedRevisionName" not in unpinned
    assert CONDITION_RUNTIME_DRIFTED not in {c["type"] for c in unpinned["conditions"]}
    drifting = resolve(pinned(pinned="cr-srt-old", token="t", last_token="t"))
    status = build_status(isvc=live, components=[], pin=drifting, now=NOW)
    assert (status["pinnedRevisionName"], status["lastRuntimeSyncToken"]) == ("cr-srt-old", "t")
    (drifted,) = [c for c in status["conditions"] if c["type"] == CONDITION_RUNTIME_DRIFTED]
    assert (drifted["status"], drifted["reason"]) == ("True", REASON_REVISION_MISMATCH)
    was_pinned = InferenceService.model_validate(
        {**body, "status": {"pinnedRevisionName": "cr-srt-old"}}
    )
    emptied = build_status(
        isvc=was_pinned, components=[], pin=resolve(pinned(auto_sync=True)), now=NOW
    )
    assert emptied["pinnedRevisionName"] == ""
