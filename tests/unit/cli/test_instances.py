"""The reports of ``kubectl ome instance list`` and ``retry-blocks`` (omed.cli.instances)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omed.cli import instances as inst
from omed.statuscodec import encode_columnar, timestamps

NOW = timestamps.parse("2026-09-14T21:00:00Z") or 0
UID = "5f0c8a52-3b1e-4c8d-9f27-6a1d0e4b7c93"


def isvc(name: str = "chat", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": "prod", "uid": UID, "generation": 2, **meta},
        "spec": {},
    }


def replica(
    component: str = "engine",
    *,
    parent: str = "chat",
    rows: list[dict[str, Any]] | None = None,
    generation: int = 4,
    observed: int | None = 4,
    columnar: bool = False,
    **status: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": f"{parent}-{component}",
            "namespace": "prod",
            "generation": generation,
            "labels": {"ome.io/inferenceservice": parent},
            "ownerReferences": [
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "name": parent,
                    "uid": UID,
                    "controller": True,
                }
            ],
        },
        "spec": {"component": component, "parentRef": {"name": parent}},
        "status": dict(status),
    }
    if observed is not None:
        body["status"]["observedGeneration"] = observed
    if rows is not None:
        if columnar:
            body["status"]["instanceStatusEncoding"] = "ColumnarV2"
            body["status"]["instanceStatusColumns"] = encode_columnar(rows)
        else:
            body["status"]["instanceStatuses"] = rows
    return body


def row(index: int, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "runningRevision": "chat-engine-a",
        "targetRevision": "chat-engine-a",
        "podCount": 1,
        "servingPodCount": 1,
        "availablePodCount": 1,
        "admitted": True,
        **extra,
    }


def table(collection: inst.Collection) -> str:
    return inst.render_table(inst.list_rows(collection))


# -- list ------------------------------------------------------------------------------------


def test_the_pages_first_example() -> None:
    out = table(inst.collect(isvc(), [replica(rows=[row(0)])]))
    assert out == (
        "COMP     IDX/INC   PHASE   PODS    REVS          AOF   EVIDENCE\n"
        "engine   0/1       Ready   1/1/1   chat...ne-a   A--   OK\n"
    )


def test_the_pages_updating_decoder_example() -> None:
    decoder = replica(
        "decoder",
        generation=4,
        observed=3,
        rows=[
            row(
                3,
                incarnation=8,
                phase="Updating",
                runningRevision="chat-decoder-old",
                targetRevision="chat-decoder-new",
                podCount=4,
                operation={"id": "op-1", "type": "Update"},
            )
        ],
    )
    # listed decoder first: the table still puts the engine first
    out = table(inst.collect(isvc(), [decoder, replica(rows=[row(0)])]))
    assert out == (
        "COMP      IDX/INC   PHASE      PODS    REVS          AOF   EVIDENCE\n"
        "engine    0/1       Ready      1/1/1   chat...ne-a   A--   OK\n"
        "decoder   3/8       Updating   1/1/4   chat...-new   AO-   STALE:3/4\n"
    )


def test_an_isvc_that_fronts_standalone_replicas_shows_the_empty_table() -> None:
    standalone = replica(parent="pool", rows=[row(0)])
    standalone["metadata"]["name"] = "pool-a"
    collection = inst.collect(isvc("front"), [standalone])
    assert table(collection) == (
        "COMP   IDX/INC   PHASE   PODS   REVS   AOF   EVIDENCE\n"
        "-      -         -       -      -      ---   OK\n"
    )
    assert collection.state == "OK" and collection.issues == []


def test_rows_come_in_index_order_and_columns_read_as_a_list() -> None:
    rows = [row(2), row(0), row(1, phase="Failed", lastFailure={"reason": "Error"})]
    out = table(inst.collect(isvc(), [replica(rows=rows, columnar=True)]))
    body = [line.split() for line in out.splitlines()[1:]]
    assert [(b[1], b[2], b[5]) for b in body] == [
        ("0/1", "Ready", "A--"),
        ("1/1", "Failed", "A-F"),
        ("2/1", "Ready", "A--"),
    ]


def test_a_component_without_rows_gets_a_row_of_dashes_with_its_evidence() -> None:
    out = table(inst.collect(isvc(), [replica(observed=None)]))
    assert out.splitlines()[1].split() == ["engine", "-", "-", "-", "-", "---", "NOT-OBSERVED"]


def test_a_claimant_failing_identity_is_left_out_and_reported() -> None:
    impostor = replica("router", rows=[row(0)])
    impostor["metadata"]["ownerReferences"][0]["uid"] = "another-uid"
    collection = inst.collect(isvc(), [replica(rows=[row(0)]), impostor])
    lines = table(collection).splitlines()
    assert lines[1].split()[-1] == "OK"
    assert lines[2].split() == ["router", "-", "-", "-", "-", "---", "ID_REJECT"]
    assert lines[3].split() == ["summary", "-", "-", "-", "-", "---", "REJECTED"]
    assert collection.state == "PARTIAL"
    (issue,) = collection.issues
    assert issue.code == "IdentityRejected" and issue.replica == "chat-router"
    assert "no controller owner reference" in issue.message


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda r: r["spec"].update(parentRef={"name": "other"}), "spec.parentRef.name"),
        (lambda r: r["metadata"]["labels"].clear(), "label ome.io/inferenceservice"),
        (lambda r: r["metadata"].update(ownerReferences=[]), "no controller owner reference"),
        (lambda r: r["metadata"].update(name="chat-engine-2"), "name is not chat-engine"),
        (lambda r: r["spec"].update(component="prefill"), "spec.component"),
    ],
)
def test_each_identity_check(damage: Any, problem: str) -> None:
    body = replica(rows=[row(0)])
    damage(body)
    problems = inst.identity_problems(body, isvc())
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_a_replica_that_claims_nothing_is_ignored_silently() -> None:
    other = replica(parent="summarize", rows=[row(0)])
    collection = inst.collect(isvc(), [other, {"not": "a replica"}])
    assert collection.components == {} and collection.issues == []


def test_a_damaged_status_is_source_unavailable_and_loses_nothing_else() -> None:
    bad = replica(rows=[row(0)])
    bad["status"]["instanceStatusEncoding"] = "ColumnarV2"  # and rows in the list too
    collection = inst.collect(isvc(), [bad, replica("router", rows=[row(0)])])
    lines = table(collection).splitlines()
    assert lines[1].split()[-1] == "SOURCE-UNAVL"
    assert lines[2].split()[0] == "router" and lines[2].split()[-1] == "OK"
    assert lines[3].split()[-1] == "SOURCE-UNAVL"
    report = inst.list_report(collection)
    assert report["state"] == "PARTIAL" and report["summary"] == "SOURCE-UNAVL"
    assert report["issues"][0]["code"] == "StatusUndecodable"


def test_replicas_that_could_not_be_listed_make_the_report_unavailable() -> None:
    collection = inst.collect(isvc(), None, list_error="inferencereplicas is forbidden")
    assert collection.state == "UNAVAILABLE"
    assert table(collection).splitlines()[1].split()[-1] == "SOURCE-UNAVL"
    assert "forbidden" in inst.list_report(collection)["issues"][0]["message"]


def test_the_json_report_carries_every_value_in_full() -> None:
    long = "chat-engine-0123456789abcdef"
    report = inst.list_report(inst.collect(isvc(), [replica(rows=[row(0, targetRevision=long)])]))
    assert report["kind"] == "InstanceListReport" and report["state"] == "OK"
    assert report["inferenceService"]["name"] == "chat"
    assert report["instances"][0]["targetRevision"] == long
    assert report["components"][0] == {
        "component": "engine",
        "inferenceReplica": "chat-engine",
        "evidence": "OK",
        "generation": 4,
        "observedGeneration": 4,
        "encoding": "DenseV1",
        "instances": 1,
    }


def test_control_characters_in_a_value_never_reach_the_terminal() -> None:
    out = table(inst.collect(isvc(), [replica(rows=[row(0, phase="Ready\x1b[2J")])]))
    assert "\x1b" not in out


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=8), children, max_size=3)
        ),
        max_leaves=12,
    ),
    st.sampled_from(["status", "metadata", "spec"]),
)
def test_no_shape_of_a_claiming_replica_raises(value: Any, where: str) -> None:
    body = replica(rows=[row(0)])
    if where == "status":
        body["status"] = value
    elif where == "metadata":
        body["metadata"]["annotations"] = value
        body["metadata"]["generation"] = value
    else:
        body["spec"]["runners"] = value
    collection = inst.collect(isvc(), [body])
    inst.render_table(inst.list_rows(collection))
    inst.list_report(collection)
    blocks = inst.retry_blocks(collection, "engine", now=NOW)
    inst.render_table(inst.retry_block_rows(blocks, now=NOW))


# -- retry-blocks ----------------------------------------------------------------------------


def block(state: str = "Held", **extra: Any) -> dict[str, Any]:
    return {
        "targetRevision": "chat-engine-7f9c4d2b",
        "state": state,
        "attemptsStarted": 3,
        "firstFailureAt": "2026-09-14T20:40:00Z",
        "lastFailureAt": "2026-09-14T20:52:31Z",
        "reason": "ImagePullBackOff",
        **extra,
    }


def blocks_table(*replicas: dict[str, Any], service: dict[str, Any] | None = None) -> str:
    collection = inst.collect(service or isvc(), list(replicas))
    report = inst.retry_blocks(collection, "engine", now=NOW)
    return inst.render_table(inst.retry_block_rows(report, now=NOW))


def test_the_pages_held_block_example() -> None:
    out = blocks_table(replica(retryBlocks=[block()]))
    digest = inst.digest("chat-engine-7f9c4d2b")
    assert out == (
        "COMP     STATE   TARGET           ATT   NEXT   REL   REASON\n"
        f"engine   HELD    {digest}   3     -      YES   ImagePullB...\n"
    )
    assert digest.startswith("chat-#") and len(digest) == 14
    assert "7f9c4d2b" not in digest  # the digest isn't the revision's hash


def test_backoff_and_retrying_blocks_show_when_they_retry() -> None:
    out = blocks_table(
        replica(
            retryBlocks=[
                block("Backoff", attemptsStarted=1, nextRetryAt="2026-09-14T21:00:42Z"),
                block(
                    "RetryInProgress",
                    targetRevision="chat-engine-0000aaaa",
                    nextRetryAt="2026-09-14T20:59:00Z",
                ),
            ]
        )
    )
    body = [line.split() for line in out.splitlines()[1:]]
    assert [(b[1], b[3], b[4], b[5]) for b in body] == [
        ("BACKOFF", "1", "42s", "-"),
        ("RETRYING", "3", "due", "-"),
    ]


def test_a_held_block_on_stale_status_is_not_eligible_and_says_why() -> None:
    out = blocks_table(replica(observed=3, retryBlocks=[block()]))
    body = [line.split() for line in out.splitlines()[1:]]
    assert body[0][1] == "HELD" and body[0][5] == "NO"
    assert body[1] == ["engine", "ISSUE", "-", "-", "-", "-", "Stale"]


def test_nothing_is_eligible_while_the_service_is_being_deleted() -> None:
    out = blocks_table(
        replica(retryBlocks=[block()]),
        service=isvc(deletionTimestamp="2026-09-14T20:59:00Z"),
    )
    body = [line.split() for line in out.splitlines()[1:]]
    assert body[0][5] == "NO" and body[1][-1] == "Deleting"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"lastFailureAt": "2026-09-14T21:30:00Z"},
            "lastFailureAt 2026-09-14T21:30:00Z is in the future",
        ),
        ({"targetRevision": "summarize-engine-7f9c4d2b"}, "targetRevision is not a revision"),
        ({"targetRevision": "chat-engine-XYZ"}, "targetRevision is not a revision"),
        ({"state": "Frozen"}, "state is not one of"),
        ({"attemptsStarted": -1}, "attemptsStarted"),
        ({"firstFailureAt": "yesterday"}, "firstFailureAt is not a time"),
    ],
)
def test_a_malformed_block_is_an_issue_and_never_eligible(
    change: dict[str, Any], problem: str
) -> None:
    bad = block(**change)
    assert any(
        p.startswith(problem)
        for p in inst.block_problems(bad, isvc_name="chat", component="engine", now=NOW)
    )
    out = blocks_table(replica(retryBlocks=[bad]))
    body = [line.split() for line in out.splitlines()[1:]]
    assert body[0][5] in ("NO", "-") and body[-1][-1] == "Malformed"


def test_a_component_without_blocks_is_empty_and_one_without_a_replica_an_issue() -> None:
    assert blocks_table(replica()).splitlines()[1].split() == [
        "engine",
        "EMPTY",
        "-",
        "-",
        "-",
        "-",
        "-",
    ]
    assert blocks_table(replica("router")).splitlines()[1].split() == [
        "engine",
        "ISSUE",
        "-",
        "-",
        "-",
        "-",
        "NoReplica",
    ]


def test_the_retry_blocks_report_counts_its_blocks() -> None:
    collection = inst.collect(
        isvc(),
        [replica(retryBlocks=[block(), block("Backoff", targetRevision="chat-engine-0000aaaa")])],
    )
    report = inst.retry_blocks_report(collection, inst.retry_blocks(collection, "engine", now=NOW))
    assert report["kind"] == "InstanceRetryBlocksReport"
    assert report["summary"] == {
        "blocks": 2,
        "held": 1,
        "backoff": 1,
        "retryInProgress": 0,
        "releaseEligible": 1,
    }
    assert report["blocks"][0]["targetRevision"] == "chat-engine-7f9c4d2b"
    assert report["blocks"][0]["releaseEligible"] is True


def test_reading_does_not_change_the_objects() -> None:
    body = replica(rows=[row(0)], retryBlocks=[block()])
    before = copy.deepcopy(body)
    collection = inst.collect(isvc(), [body])
    inst.list_report(collection)
    inst.retry_blocks_report(collection, inst.retry_blocks(collection, "engine", now=NOW))
    assert body == before


def test_short_and_cut() -> None:
    assert inst.short("chat-engine-a", 11) == "chat...ne-a"
    assert inst.short("chat-decoder-new", 11) == "chat...-new"
    assert inst.short("short", 11) == "short"
    assert inst.cut("ImagePullBackOff", 10) == "ImagePullB..."
    assert inst.cut("BackOff", 10) == "BackOff"


# -- -o name -----------------------------------------------------------------------------------


def test_list_names_are_component_and_index_of_each_recorded_instance() -> None:
    collection = inst.collect(
        isvc(),
        [
            replica("engine", rows=[row(1), row(0)], columnar=True),
            replica("router", rows=[]),  # no rows: no Instance, no name
            replica("decoder", rows=[row(3)]),
        ],
    )
    assert inst.list_names(collection) == ["engine/0", "engine/1", "decoder/3"]
    # The same Instances, in the same order, as the table's rows.
    assert [
        f"{r[0]}/{r[1].split('/')[0]}" for r in inst.list_rows(collection)[1:] if r[1] != "-"
    ] == inst.list_names(collection)


def test_retry_block_names_are_the_full_revisions_release_held_takes() -> None:
    collection = inst.collect(
        isvc(),
        [
            replica(
                retryBlocks=[
                    block(),
                    block("Backoff", targetRevision="chat-engine-0000aaaa"),
                    block(targetRevision=None),  # malformed: an issue, no name
                ]
            )
        ],
    )
    report = inst.retry_blocks(collection, "engine", now=NOW)
    assert inst.retry_block_names(report) == ["chat-engine-7f9c4d2b", "chat-engine-0000aaaa"]
