"""release-held's checks and its ActionResult (omed.cli.release_held)."""

from __future__ import annotations

from typing import Any

import pytest

from omed.cli import release_held as rh
from omed.cli.instances import collect, render_table
from omed.statuscodec import timestamps

from .test_instances import isvc, replica

NOW = timestamps.parse("2026-09-14T21:00:00Z") or 0
REVISION = "chat-engine-7f9c4d2b"


def held(**extra: Any) -> dict[str, Any]:
    return {
        "targetRevision": REVISION,
        "state": "Held",
        "attemptsStarted": 3,
        "firstFailureAt": "2026-09-14T20:40:00Z",
        "lastFailureAt": "2026-09-14T20:52:31Z",
        "reason": "ImagePullBackOff",
        **extra,
    }


def engine(*blocks: dict[str, Any], **kw: Any) -> dict[str, Any]:
    body = replica(retryBlocks=list(blocks) or [held()], **kw)
    body["metadata"]["annotations"] = {"ome.io/controller-write": "true"}
    body["metadata"]["resourceVersion"] = "4711"
    return body


def check(*replicas: dict[str, Any], revision: str = REVISION, service: Any = None) -> rh.Target:
    return rh.check(
        collect(service or isvc(), list(replicas) or [engine()]),
        component="engine",
        revision=revision,
        now=NOW,
    )


def test_a_held_block_by_name_or_hash() -> None:
    for revision in (REVISION, "7f9c4d2b"):
        target = check(revision=revision)
        assert (target.replica, target.revision, target.hash) == (
            "chat-engine",
            REVISION,
            "7f9c4d2b",
        )
    assert rh.patch(check()) == {
        "metadata": {
            "resourceVersion": "4711",
            "annotations": {"ome.io/release-held-revision": REVISION},
        }
    }


@pytest.mark.parametrize(
    ("replicas", "revision", "cause"),
    [
        ([engine()], "00000000", "no retry block matches --revision"),
        ([engine(held(state="Backoff"))], REVISION, "the block that matches is Backoff, not Held"),
        (
            [engine(), replica("router", observed=3)],
            REVISION,
            "InferenceReplica chat-router has stale status (STALE:3/4)",
        ),
        (
            [engine(held(lastFailureAt="2026-09-14T22:00:00Z"))],
            REVISION,
            "a retry block of InferenceReplica chat-engine is malformed: lastFailureAt",
        ),
        (
            [replica(retryBlocks=[held()])],
            REVISION,
            'InferenceReplica chat-engine lacks ome.io/controller-write: "true"',
        ),
        (
            [replica("router")],
            REVISION,
            "no InferenceReplica of the InferenceService runs the engine",
        ),
    ],
)
def test_the_first_refusal_names_its_cause(
    replicas: list[dict[str, Any]], revision: str, cause: str
) -> None:
    with pytest.raises(rh.Refused) as refused:
        check(*replicas, revision=revision)
    message = str(refused.value)
    assert message.startswith(
        f"no releasable Held retry block for revision {revision} on component engine of "
        "InferenceService prod/chat: "
    )
    assert message.split(": ", 1)[1].startswith(cause), message


def test_a_replica_being_deleted_is_a_cause() -> None:
    router = replica("router")
    router["metadata"]["deletionTimestamp"] = "2026-09-14T20:59:00Z"
    with pytest.raises(rh.Refused, match="InferenceReplica chat-router is being deleted"):
        check(engine(), router)


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (
            lambda s, r: s["metadata"].update(deletionTimestamp="2026-09-14T20:59:00Z"),
            "InferenceService prod/chat is being deleted",
        ),
        (
            lambda s, r: r["metadata"]["ownerReferences"][0].update(uid="x"),
            "InferenceService prod/chat has an unsafe identity",
        ),
        (
            lambda s, r: r["status"].update(instanceStatusEncoding="ColumnarV2"),
            "cannot check InferenceService prod/chat",
        ),
        (
            lambda s, r: r["status"].update(instanceStatuses=[{"index": i} for i in range(2049)]),
            "InferenceReplica prod/chat-engine has 2049 Instances, too many to check safely "
            "(at most 2048)",
        ),
    ],
)
def test_target_checks(prepare: Any, message: str) -> None:
    service, body = isvc(), engine()
    prepare(service, body)
    with pytest.raises(rh.Refused) as refused:
        check(body, service=service)
    assert str(refused.value).startswith(message)


def test_the_pages_client_dry_run_result_byte_for_byte() -> None:
    report = rh.result(check(), isvc="chat", component="engine", dry_run="client")
    assert render_table(rh.result_rows(report)) == (
        "FIELD           VALUE\n"
        "action          instance release-held\n"
        "target          InferenceReplica/prod/chat-engine\n"
        "dry-run         client\n"
        "accepted        No\n"
        "applied         No\n"
        "request-id      -\n"
        "revision-hash   7f9c4d2b\n"
        "message         Validated locally; no patch sent.\n"
        "follow-up       kubectl ome instance retry-blocks chat --component=en...\n"
        "hint            Use -o json or -o yaml for full values.\n"
    )


def test_the_pages_applied_result_byte_for_byte() -> None:
    report = rh.result(check(revision="7f9c4d2b"), isvc="chat", component="engine", dry_run="none")
    lines = render_table(rh.result_rows(report)).splitlines()
    assert lines[3:6] == ["dry-run         none", "accepted        Yes", "applied         Yes"]
    assert lines[8] == "message         API accepted release annotation request; controller r..."
    assert report["message"] == rh.MESSAGE_APPLIED
    assert report["followUp"] == "kubectl ome instance retry-blocks chat --component=engine -n prod"
    server = rh.result(check(), isvc="chat", component="engine", dry_run="server")
    assert (server["accepted"], server["applied"]) == (True, False)


def test_the_preview() -> None:
    out = render_table(rh.preview_rows(check()))
    assert out.splitlines()[2:] == [
        "revision     chat-engine-7f9c4d2b",
        "state        Held",
        "attempts     3",
        "annotation   ome.io/release-held-revision=chat-engine-7f9c4d2b",
    ]


def test_unheld_waits_for_the_annotation_to_go_and_the_block_to_leave() -> None:
    body = engine()
    assert not rh.unheld(body, revision=REVISION)
    assert not rh.unheld(body, revision=None)
    assert rh.unheld(body, revision="00000000")  # another revision is not held
    body["metadata"]["annotations"]["ome.io/release-held-revision"] = REVISION
    body["status"]["retryBlocks"] = []
    assert not rh.unheld(body, revision="7f9c4d2b")  # OME hasn't taken the release yet
    del body["metadata"]["annotations"]["ome.io/release-held-revision"]
    assert rh.unheld(body, revision="7f9c4d2b") and rh.unheld(body, revision=None)
    body["status"]["retryBlocks"] = [held(state="RetryInProgress")]
    assert rh.unheld(body, revision=REVISION)
