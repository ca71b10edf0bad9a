"""Repair's pure parts: the replacement file's checks, the plan and its refusals, the report."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.cli.preflight import run
from omed.cli.preflight_repair import (
    APPLIED_HEADER,
    DRY_RUN_FOOTER,
    DRY_RUN_HEADER,
    RepairError,
    RepairRefused,
    check_replacement,
    load_replacement,
    plan_repair,
    report_lines,
)
from omed.config import OMENativeStatusConfig
from omed.statuscodec import decode_status, encode_columnar

from .test_preflight_inventory import GOOD

COLUMNAR = OMENativeStatusConfig.model_validate(
    {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 8}
)
DENSE = OMENativeStatusConfig.model_validate(
    {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 8}
)
SOURCE = "replacement rows.yaml"


def row(index: int, **fields: Any) -> dict[str, Any]:
    return {
        "index": index,
        "incarnation": 1,
        "phase": "Ready",
        "runningRevision": "example-engine-2f32f6fe",
        "podCount": 1,
        "servingPodCount": 1,
        "availablePodCount": 1,
        "admitted": True,
        **fields,
    }


ROWS = [row(index) for index in range(6)]


# -- the replacement file ----------------------------------------------------------------------


def test_the_pages_example_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "rows.yaml"
    path.write_text(
        "instanceStatuses:\n"
        "- index: 0\n"
        "  incarnation: 1\n"
        "  phase: Ready\n"
        "  runningRevision: example-engine-2f32f6fe\n"
        "  podCount: 1\n"
        "  servingPodCount: 1\n"
        "  availablePodCount: 1\n"
        "  admitted: true\n"
        "  readySince: 2026-09-14T20:50:00Z\n"
    )
    assert load_replacement(path) == [row(0, readySince="2026-09-14T20:50:00Z")]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (None, f"{SOURCE} must be a mapping with the one key instanceStatuses"),
        ([row(0)], f"{SOURCE} must be a mapping with the one key instanceStatuses"),
        ({}, f"{SOURCE} has no instanceStatuses"),
        (
            {"instanceStatuses": [row(0)], "status": {}, "apiVersion": "v1"},
            f"{SOURCE} must hold only instanceStatuses; remove apiVersion, status",
        ),
        ({"instanceStatuses": {"0": row(0)}}, f"{SOURCE}: instanceStatuses must be a list of rows"),
        (
            {"instanceStatuses": []},
            f"{SOURCE}: instanceStatuses is empty; write a row for every Instance",
        ),
        (
            {"instanceStatuses": [row(0), row(0)]},
            f"{SOURCE}: rows 0 and 1 both have index 0",
        ),
        ({"instanceStatuses": [{"phase": "Ready"}]}, f"{SOURCE}: row 0 has no index"),
        (
            {"instanceStatuses": [row(0, phase="Running")]},
            f"{SOURCE}: row 0: phase is 'Running', not one of Creating, Deleting, Failed, "
            "Migrating, Pending, Ready, Restarting, Updating",
        ),
        (
            {"instanceStatuses": [row(0, podcount=1)]},
            f"{SOURCE}: row 0: unknown key(s) 'podcount'",
        ),
        (
            {"instanceStatuses": [row(0, podCount="1")]},
            f"{SOURCE}: row 0: podCount must be an integer from 0, got '1'",
        ),
        (
            {"instanceStatuses": [row(0), row(3, readySince="yesterday")]},
            f"{SOURCE}: row 1 (index 3): readySince: Input should be a valid datetime or date, "
            "input is too short",
        ),
        (
            {"instanceStatuses": [row(0), row(1, podCount=2, servingPodCount=3)]},
            f"{SOURCE}: row 1 (index 1): servingPodCount 3 is more than podCount 2",
        ),
        (
            {"instanceStatuses": [row(4, podCount=0)]},
            f"{SOURCE}: row 0 (index 4): servingPodCount 1 is more than podCount 0",
        ),
    ],
)
def test_bad_replacements_are_errors(document: Any, message: str) -> None:
    with pytest.raises(RepairError) as caught:
        check_replacement(document, source=SOURCE)
    assert str(caught.value) == message


def test_a_malformed_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rows.yaml"
    path.write_text("instanceStatuses:\n- index: 0\n  index: 1\n")
    with pytest.raises(RepairError) as caught:
        load_replacement(path)
    assert str(caught.value) == (
        f"replacement {path} is not valid YAML: line 3, column 3: found the key 'index' twice"
    )


# -- the plan ----------------------------------------------------------------------------------


def damaged_object(rows: list[dict[str, Any]] = ROWS) -> dict[str, Any]:
    columns = encode_columnar(rows)
    columns["index"] = f"0-{len(rows) - 2}"
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"namespace": "serving", "name": "example-engine", "resourceVersion": "4711"},
        "spec": {"component": "engine", "replicas": len(rows)},
        "status": {
            "observedGeneration": 4,
            "replicas": len(rows),
            "instanceStatusEncoding": "ColumnarV2",
            "instanceStatusColumns": columns,
        },
    }


def test_a_columnar_repair_writes_columns_and_keeps_the_rest() -> None:
    obj = damaged_object()
    plan = plan_repair(obj, rows=ROWS, block=COLUMNAR)
    assert (plan.encoding, plan.stored, plan.failure.reason) == (
        "ColumnarV2",
        "ColumnarV2",
        "coverage",
    )
    assert plan.body["metadata"] == obj["metadata"]  # the resourceVersion guards the write
    assert plan.body["spec"] == obj["spec"]
    assert plan.body["status"] == {
        "observedGeneration": 4,
        "replicas": 6,
        "instanceStatusEncoding": "ColumnarV2",
        "instanceStatusColumns": encode_columnar(ROWS),
    }
    assert decode_status(plan.body["status"], max_rows=8) == ROWS
    assert (plan.removed, plan.kept) == ((), ("observedGeneration", "replicas"))
    assert obj == damaged_object()  # the object read is not changed


def test_a_dense_repair_writes_the_list_and_removes_the_columns() -> None:
    plan = plan_repair(damaged_object(), rows=ROWS, block=DENSE)
    assert plan.encoding == "DenseV1"
    assert plan.body["status"] == {"observedGeneration": 4, "replicas": 6, "instanceStatuses": ROWS}
    assert plan.removed == ("instanceStatusEncoding", "instanceStatusColumns")


def test_the_dry_run_report() -> None:
    plan = plan_repair(damaged_object(), rows=ROWS, block=DENSE)
    size = plan.payload_size
    assert report_lines(plan, cluster="prod-east") == [
        DRY_RUN_HEADER,
        "cluster: prod-east",
        "inferenceReplica: serving/example-engine (resourceVersion 4711)",
        'omenativeStatus: {"instanceStatusEncoding":"DenseV1","maxDecodedInstances":8} '
        "(the cluster's block matches the inventory's)",
        "stored: ColumnarV2, cannot be decoded (coverage: index holds 5 values for 6 entries: "
        "some are missing)",
        "replacement: 6 rows (indexes 0-5), checked",
        "spec.replicas: 6",
        f"would write: 6 rows as DenseV1 in status.instanceStatuses ({size} bytes); removed "
        "status.instanceStatusEncoding, status.instanceStatusColumns",
        "would keep: status.observedGeneration, status.replicas",
        DRY_RUN_FOOTER,
    ]


def test_the_applied_report() -> None:
    rows = [row(0), row(1), row(2), row(5), row(7), row(8)]
    plan = plan_repair(damaged_object(rows), rows=rows, block=COLUMNAR)
    written = {"metadata": {"resourceVersion": "4720"}, "status": plan.body["status"]}
    lines = report_lines(plan, cluster="prod-east", written=written)
    assert lines[0] == APPLIED_HEADER
    assert "replacement: 6 rows (indexes 0-2, 5, 7-8), checked" in lines
    assert lines[-3:] == [
        f"wrote: 6 rows as ColumnarV2 in status.instanceStatusColumns ({plan.payload_size} bytes)",
        "kept: status.observedGeneration, status.replicas",
        "now: resourceVersion 4720; the stored status decodes (6 rows)",
    ]


def test_a_status_that_decodes_is_not_repaired() -> None:
    obj = damaged_object()
    obj["status"]["instanceStatusColumns"] = encode_columnar(ROWS)
    with pytest.raises(RepairRefused) as caught:
        plan_repair(obj, rows=ROWS, block=COLUMNAR)
    assert str(caught.value) == (
        "InferenceReplica serving/example-engine is not damaged: its status decodes (6 rows); "
        "repair replaces only a status that can't be decoded"
    )


def test_cardinality_limit_is_refused() -> None:
    big = [row(index) for index in range(9)]
    obj = damaged_object(big)
    obj["status"]["instanceStatusColumns"] = encode_columnar(big)  # intact, but over the bound
    with pytest.raises(RepairRefused) as caught:
        plan_repair(obj, rows=ROWS, block=COLUMNAR)
    assert str(caught.value) == (
        "InferenceReplica serving/example-engine fails with cardinality_limit (9 rows are "
        "stored, more than maxDecodedInstances 8): raise or restore maxDecodedInstances instead "
        "of repairing"
    )


def test_columns_under_a_block_without_a_bound_are_refused() -> None:
    unbounded = OMENativeStatusConfig.model_validate({"instanceStatusEncoding": "DenseV1"})
    with pytest.raises(RepairRefused) as caught:
        plan_repair(damaged_object(), rows=ROWS, block=unbounded)
    assert str(caught.value).startswith(
        "InferenceReplica serving/example-engine fails with cardinality_limit (no bound on "
    )


def test_more_replacement_rows_than_the_bound_are_written_as_the_list() -> None:
    """The manager stores more rows than maxDecodedInstances as the DenseV1 list (read whatever
    its length), so repair writes them so too: only a stored cardinality_limit is refused."""
    many = [row(index) for index in range(9)]
    plan = plan_repair(damaged_object(), rows=many, block=COLUMNAR)
    assert plan.encoding == "DenseV1"
    assert plan.body["status"] == {"observedGeneration": 4, "replicas": 6, "instanceStatuses": many}
    assert decode_status(plan.body["status"], max_rows=8) == many
    assert (
        f"would write: 9 rows as DenseV1 in status.instanceStatuses ({plan.payload_size} "
        "bytes: more rows than maxDecodedInstances 8 are stored as a list); removed "
        "status.instanceStatusEncoding, status.instanceStatusColumns"
    ) in report_lines(plan, cluster="prod-east")
    dense = plan_repair(damaged_object(), rows=many, block=DENSE)  # a list anyway: no note
    assert (
        f"would write: 9 rows as DenseV1 in status.instanceStatuses ({dense.payload_size} bytes); "
        "removed status.instanceStatusEncoding, status.instanceStatusColumns"
    ) in report_lines(dense, cluster="prod-east")


def test_a_row_the_manager_refuses_is_damaged_and_repaired() -> None:
    stored = [row(0), row(1, readySince="not-a-time"), row(2)]
    obj = damaged_object(stored)
    obj["status"]["instanceStatusColumns"] = encode_columnar(stored)  # the codec decodes it
    assert decode_status(obj["status"], max_rows=8) == stored
    fixed = [row(0), row(1, readySince="2026-09-14T20:50:00Z"), row(2)]
    plan = plan_repair(obj, rows=fixed, block=COLUMNAR)
    assert (plan.failure.reason, plan.failure.detail) == (
        "row_shape",
        "the row of index 1 is not a valid Instance row: readySince: Input should be a valid "
        'datetime or date, invalid character in year (got "not-a-time")',
    )
    assert decode_status(plan.body["status"], max_rows=8) == fixed
    assert (
        "stored: ColumnarV2, cannot be decoded (row_shape: the row of index 1 is not a valid "
        "Instance row: readySince: Input should be a valid datetime or date, invalid character "
        'in year (got "not-a-time"))'
    ) in report_lines(plan, cluster="prod-east")


def test_the_report_headers_are_the_pages() -> None:
    assert DRY_RUN_HEADER == "InferenceReplica status repair (dry run: nothing was written)"
    assert DRY_RUN_FOOTER == "Re-run with --apply to write."
    assert APPLIED_HEADER == "InferenceReplica status repair (applied)"
    plan = plan_repair(damaged_object(), rows=ROWS, block=COLUMNAR)
    dry = report_lines(plan, cluster="prod-east")
    assert (dry[0], dry[-1]) == (
        "InferenceReplica status repair (dry run: nothing was written)",
        "Re-run with --apply to write.",
    )
    written = {"metadata": {"resourceVersion": "4720"}, "status": plan.body["status"]}
    applied = report_lines(plan, cluster="prod-east", written=written)
    assert applied[0] == "InferenceReplica status repair (applied)"
    assert "Re-run with --apply to write." not in applied


# -- through the CLI: a bad replacement exits 2 before any cluster is read --------------------


async def test_a_bad_replacement_exits_2(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(copy.deepcopy(GOOD)))
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump({"instanceStatuses": [row(0)], "note": "x"}))
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "repair", "--inventory", str(inventory), "--cluster", "prod-east",
        "--namespace", "serving", "--name", "example-engine", "--replacement", str(rows),
    ]  # fmt: skip
    code = await run(argv, out=out, err=err)
    assert (code, out.getvalue()) == (2, "")
    assert (
        err.getvalue()
        == f"error: replacement {rows} must hold only instanceStatuses; remove note\n"
    )


async def test_an_unknown_cluster_exits_2(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(copy.deepcopy(GOOD)))
    rows = tmp_path / "rows.yaml"
    rows.write_text(yaml.safe_dump({"instanceStatuses": [row(0)]}))
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "repair", "--inventory", str(inventory), "--cluster", "prod-north",
        "--namespace", "serving", "--name", "example-engine", "--replacement", str(rows),
    ]  # fmt: skip
    assert await run(argv, out=out, err=err) == 2
    assert err.getvalue() == (
        "error: the inventory has no cluster prod-north (it has prod-east, prod-west)\n"
    )


# -- through the CLI, against a scripted API server: every failure but a refusal exits 2 -------

CONFIGMAP_PATH = "/api/v1/namespaces/ome/configmaps/inferenceservice-config"
REPLICA_PATH = "/apis/ome.io/v1beta1/namespaces/serving/inferencereplicas/example-engine"
DENSE_BLOCK = '{"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 20000}'
DENSE_CONFIGMAP = {"data": {"omenativeStatus": DENSE_BLOCK}}


class ScriptedClient:
    """Answers GETs by path and the status PUT from a table: a value, or an exception."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.config = type("Config", (), {"host": "https://10.0.0.1:6443"})()
        self.requests: list[str] = []

    async def __aenter__(self) -> ScriptedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def _answer(self, key: str) -> Any:
        self.requests.append(key)
        answer = self.answers[key]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        return self._answer(f"GET {resource.path(namespace, name)}")

    async def replace_status(self, resource: Any, body: Any, namespace: str | None = None) -> Any:
        return self._answer(f"PUT {resource.path(namespace, body['metadata']['name'], 'status')}")


def healthy_answers() -> dict[str, Any]:
    obj = damaged_object()
    written = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "4720"}}
    written["status"] = {"observedGeneration": 4, "replicas": 6, "instanceStatuses": ROWS}
    return {
        f"GET {CONFIGMAP_PATH}": DENSE_CONFIGMAP,
        f"GET {REPLICA_PATH}": obj,
        f"PUT {REPLICA_PATH}/status": written,
    }


async def repair(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    answers: dict[str, Any],
    *flags: str,
    replacement: str | None = None,
    connect_error: BaseException | None = None,
) -> tuple[int, str, str, ScriptedClient]:
    from omed.cli import preflight_repair

    client = ScriptedClient(answers)

    async def connect(cluster: Any, *, timeout: float) -> ScriptedClient:
        if connect_error is not None:
            raise connect_error
        return client

    monkeypatch.setattr(preflight_repair, "connect", connect)
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(copy.deepcopy(GOOD)))
    rows = tmp_path / "rows.yaml"
    rows.write_text(replacement or yaml.safe_dump({"instanceStatuses": ROWS}))
    argv = [
        "repair", "--inventory", str(inventory), "--cluster", "prod-east",
        "--namespace", "serving", "--name", "example-engine", "--replacement", str(rows), *flags,
    ]  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    code = await run(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue(), client


async def test_the_scripted_repair_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err, client = await repair(tmp_path, monkeypatch, healthy_answers(), "--apply")
    assert (code, err) == (0, "")
    assert out.startswith("InferenceReplica status repair (applied)\n")
    assert client.requests[-1] == f"PUT {REPLICA_PATH}/status"


@pytest.mark.parametrize(
    ("key", "answer", "message"),
    [
        (
            f"GET {CONFIGMAP_PATH}",
            b"<html>Proxy Authentication Required</html>",
            "cannot read configmap ome/inferenceservice-config: the API server answered GET "
            f'{CONFIGMAP_PATH} with a body that is not JSON (42 bytes: "<html>Proxy '
            'Authentication Required</html>"), not a JSON object',
        ),
        (
            f"GET {REPLICA_PATH}",
            ["a", "list"],
            "cannot read InferenceReplica serving/example-engine: the API server answered GET "
            f"{REPLICA_PATH} with a JSON list, not a JSON object",
        ),
        (
            f"GET {CONFIGMAP_PATH}",
            RuntimeError("exec plugin: aws exited with 255"),
            "the repair stopped: RuntimeError: exec plugin: aws exited with 255",
        ),
        (
            f"GET {CONFIGMAP_PATH}",
            FileNotFoundError(2, "No such file or directory", "/etc/ome/certs/east.crt"),
            "cannot use context east from /etc/ome/kubeconfigs/prod-east: [Errno 2] No such file "
            "or directory: '/etc/ome/certs/east.crt'",
        ),
        (
            f"GET {REPLICA_PATH}",
            TimeoutError(),
            "cannot reach https://10.0.0.1:6443: TimeoutError",
        ),
    ],
)
async def test_unexpected_failures_are_errors_that_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, answer: Any, message: str
) -> None:
    answers = healthy_answers()
    answers[key] = answer
    code, out, err, client = await repair(tmp_path, monkeypatch, answers, "--apply")
    assert (code, out) == (2, "")
    assert err == f"error: {message}\n"
    assert not any(request.startswith("PUT") for request in client.requests)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            TimeoutError(),
            "cannot reach https://10.0.0.1:6443: TimeoutError; the write may or may not have "
            "been stored: run the dry run again to see the stored status",
        ),
        (
            b"OK",
            "cannot confirm the write of InferenceReplica serving/example-engine: the API server "
            f'answered PUT {REPLICA_PATH}/status with a body that is not JSON (2 bytes: "OK"), '
            "not a JSON object; the write may or may not have been stored: run the dry run again "
            "to see the stored status",
        ),
    ],
)
async def test_a_write_without_a_readable_answer_says_it_may_have_happened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: Any, message: str
) -> None:
    answers = healthy_answers()
    answers[f"PUT {REPLICA_PATH}/status"] = answer
    code, out, err, _ = await repair(tmp_path, monkeypatch, answers, "--apply")
    assert (code, out, err) == (2, "", f"error: {message}\n")


async def test_a_failing_kubeconfig_load_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err, _ = await repair(
        tmp_path, monkeypatch, {}, connect_error=ValueError("cannot load context east from x: y")
    )
    assert (code, out, err) == (2, "", "error: cannot load context east from x: y\n")


async def test_anything_else_is_an_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err, _ = await repair(
        tmp_path, monkeypatch, {}, connect_error=KeyError("no such thing")
    )
    assert (code, out, err) == (2, "", "error: the repair stopped: KeyError: 'no such thing'\n")


NAME_RULE = (
    "is not a valid InferenceReplica name: a name is 1 to 253 lowercase letters, digits, '-' "
    "and '.', starting and ending with a letter or digit"
)
NAMESPACE_RULE = (
    "is not a valid namespace: a namespace is 1 to 63 lowercase letters, digits and '-', "
    "starting and ending with a letter or digit"
)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--name", "", f'argument --name: "" {NAME_RULE}'),
        ("--name", "Example-Engine", f"argument --name: 'Example-Engine' {NAME_RULE}"),
        ("--name", "engine/status", f"argument --name: 'engine/status' {NAME_RULE}"),
        ("--name", "-engine", f"argument --name: '-engine' {NAME_RULE}"),
        ("--name", "a" * 254, f"argument --name: '{'a' * 80}...' {NAME_RULE}"),
        ("--namespace", "", f'argument --namespace: "" {NAMESPACE_RULE}'),
        ("--namespace", "serving.prod", f"argument --namespace: 'serving.prod' {NAMESPACE_RULE}"),
        ("--namespace", "s" * 64, f"argument --namespace: '{'s' * 64}' {NAMESPACE_RULE}"),
    ],
)
async def test_a_name_that_cant_name_the_object_is_a_bad_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str, value: str, message: str
) -> None:
    code, out, err, client = await repair(tmp_path, monkeypatch, {}, f"{flag}={value}")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {message}\nusage: ome-status-preflight repair ")
    assert client.requests == []  # no GET, least of all a list


@pytest.mark.parametrize(
    ("namespace", "name"), [("serving", "example-engine.v2"), ("a", "a"), ("s" * 63, "a" * 253)]
)
def test_valid_names_pass(namespace: str, name: str) -> None:
    from omed.cli.preflight_repair import check_name, check_namespace

    assert (check_namespace(namespace), check_name(name)) == (namespace, name)


async def test_run_repair_checks_the_names_too() -> None:
    from omed.cli.preflight_inventory import parse_inventory
    from omed.cli.preflight_repair import run_repair

    with pytest.raises(RepairError, match=r'^"" is not a valid InferenceReplica name'):
        await run_repair(
            inventory=parse_inventory(copy.deepcopy(GOOD)),
            cluster_name="prod-east",
            namespace="serving",
            name="",
            rows=ROWS,
            apply=False,
        )


async def test_a_deeply_nested_replacement_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = "instanceStatuses: " + "[" * 400 + "]" * 400 + "\n"
    code, out, err, client = await repair(tmp_path, monkeypatch, {}, replacement=deep)
    assert (code, out) == (2, "")
    path = tmp_path / "rows.yaml"
    assert err == f"error: replacement {path} is nested more than 32 levels deep\n"
    assert client.requests == []
