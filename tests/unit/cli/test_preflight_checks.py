"""The fleet check's pure parts: image, ConfigMap block, CRD schema, and the replica tally."""

from __future__ import annotations

import copy
import json
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from omed.cli.preflight_checks import (
    CONFIG_BLOCK,
    CRD_SCHEMA,
    KUBECONFIG,
    MANAGER_IMAGE,
    UNCONVERTED,
    Problem,
    ReplicaTally,
    SchemaProblem,
    check_cluster,
    config_problems,
    image_problems,
    schema_problems,
    server_relative_url,
    unconverted_problems,
)
from omed.cli.preflight_inventory import Inventory, parse_inventory
from omed.statuscodec import decode_status, encode_columnar
from omed.workqueue import TerminalError

INVENTORY: dict[str, Any] = {
    "managerImage": "ome/ome-manager:v1.3.0",
    "omenativeStatus": {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 4},
    "manager": {
        "namespace": "ome",
        "deployment": "ome-controller-manager",
        "container": "manager",
        "configMap": "inferenceservice-config",
    },
    "pageSize": 500,
    "clusters": [{"name": "prod-east", "kubeconfig": "/nowhere/prod-east", "context": "east"}],
}


def inventory(**block: Any) -> Inventory:
    document = copy.deepcopy(INVENTORY)
    document["omenativeStatus"].update(block)
    return parse_inventory(document)


def rows(count: int) -> list[dict[str, Any]]:
    return [{"index": index, "phase": "Ready", "podCount": 1} for index in range(count)]


# -- the manager image -------------------------------------------------------------------------


def deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


def test_the_manager_container_must_run_the_inventorys_image() -> None:
    sidecar = {"name": "kube-rbac-proxy", "image": "ome/ome-manager:v1.3.0"}
    good = deployment(sidecar, {"name": "manager", "image": "ome/ome-manager:v1.3.0"})
    assert image_problems(good, inventory=inventory()) == []
    old = deployment({"name": "manager", "image": "ome/ome-manager:v1.2.2"}, sidecar)
    assert image_problems(old, inventory=inventory()) == [
        Problem(
            MANAGER_IMAGE,
            "container manager of deployment ome/ome-controller-manager runs "
            "ome/ome-manager:v1.2.2, the inventory wants ome/ome-manager:v1.3.0",
        )
    ]


def test_a_tag_is_not_a_digest_and_no_image_is_no_image() -> None:
    pinned = deployment({"name": "manager", "image": "ome/ome-manager@sha256:abc"})
    assert image_problems(pinned, inventory=inventory())[0].detail.endswith(
        "runs ome/ome-manager@sha256:abc, the inventory wants ome/ome-manager:v1.3.0"
    )
    bare = deployment({"name": "manager"})
    assert "runs no image," in image_problems(bare, inventory=inventory())[0].detail


@pytest.mark.parametrize(
    "body", [deployment({"name": "kube-rbac-proxy", "image": "x"}), {"spec": None}, {}]
)
def test_a_deployment_without_the_container(body: dict[str, Any]) -> None:
    assert image_problems(body, inventory=inventory()) == [
        Problem(MANAGER_IMAGE, "deployment ome/ome-controller-manager has no container manager")
    ]


# -- the ConfigMap block -----------------------------------------------------------------------


def configmap(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": "inferenceservice-config"}, "data": data}


def test_the_configmap_block_must_equal_the_inventorys() -> None:
    same = configmap(
        omenativeStatus=json.dumps(
            {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 4, "newKey": 1},
            indent=2,
        )
    )
    assert config_problems(same, inventory=inventory()) == []
    other = configmap(omenativeStatus='{"instanceStatusEncoding": "DenseV1"}')
    assert config_problems(other, inventory=inventory()) == [
        Problem(
            CONFIG_BLOCK,
            "configmap ome/inferenceservice-config sets omenativeStatus "
            '{"instanceStatusEncoding":"DenseV1","maxDecodedInstances":null}, the inventory '
            'wants {"instanceStatusEncoding":"ColumnarV2","maxDecodedInstances":4}',
        )
    ]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {},
            "Failed to initialize OMENative status configuration: "
            "ConfigMap inferenceservice-config has no omenativeStatus entry",
        ),
        (
            {"omenativeStatus": '{"instanceStatusEncoding": "ColumnarV3"}'},
            "Failed to initialize OMENative status configuration: validate "
            "omenativeStatus.instanceStatusEncoding: invalid omenativeStatus.instanceStatusEncoding"
            ' "ColumnarV3" must be DenseV1 or ColumnarV2',
        ),
        (
            {
                "omenativeStatus": '{"instanceStatusEncoding": "ColumnarV2", '
                '"maxDecodedInstances": 4}',
                "eventRecorder": '{"burstSize": 0}',
            },
            "Failed to initialize event recorder configuration: validate "
            "eventRecorder.burstSize: invalid eventRecorder.burstSize 0 must be a positive "
            "integer",
        ),
    ],
)
def test_a_block_the_manager_would_refuse_is_reported_with_its_error(
    data: dict[str, str], error: str
) -> None:
    assert config_problems(configmap(**data), inventory=inventory()) == [
        Problem(CONFIG_BLOCK, f"configmap ome/inferenceservice-config: {error}")
    ]


# -- the CRD schema through OpenAPI v3 ---------------------------------------------------------

URL = "/openapi/v3/apis/ome.io/v1beta1?hash=584709848505BC97"


def test_the_group_versions_url_comes_from_discovery() -> None:
    index = {"paths": {"apis/ome.io/v1beta1": {"serverRelativeURL": URL}, "api/v1": {}}}
    assert server_relative_url(index) == URL
    with pytest.raises(SchemaProblem, match=r"no apis/ome\.io/v1beta1: the InferenceReplica CRD"):
        server_relative_url({"paths": {"api/v1": {}}})
    with pytest.raises(SchemaProblem, match="no paths map"):
        server_relative_url([])
    with pytest.raises(SchemaProblem, match="no serverRelativeURL"):
        server_relative_url({"paths": {"apis/ome.io/v1beta1": {}}})


def openapi(
    status_properties: dict[str, Any], *, key: str = "io.ome.v1beta1.InferenceReplica"
) -> Any:
    return {
        "components": {
            "schemas": {
                "io.ome.v1beta1.InferenceService": {"type": "object"},
                key: {
                    "type": "object",
                    "x-kubernetes-group-version-kind": [
                        {"group": "ome.io", "kind": "InferenceReplica", "version": "v1beta1"}
                    ],
                    "properties": {"status": {"type": "object", "properties": status_properties}},
                },
            }
        }
    }


def test_the_status_schema_must_have_both_fields() -> None:
    both = {"instanceStatuses": {}, "instanceStatusEncoding": {}, "instanceStatusColumns": {}}
    assert schema_problems(openapi(both)) == []
    assert schema_problems(openapi(both, key="renamed.InferenceReplica")) == []
    assert schema_problems(openapi({"instanceStatuses": {}})) == [
        Problem(
            CRD_SCHEMA,
            "the InferenceReplica status schema has no instanceStatusEncoding and no "
            "instanceStatusColumns: upgrade the ome-crd chart before ome-resources",
        )
    ]
    assert schema_problems(openapi({"instanceStatusEncoding": {}}))[0].detail.startswith(
        "the InferenceReplica status schema has no instanceStatusColumns: "
    )


def test_a_status_schema_behind_a_ref_is_followed() -> None:
    document = openapi({})
    schemas = document["components"]["schemas"]
    schemas["io.ome.v1beta1.InferenceReplica"]["properties"]["status"] = {
        "allOf": [{"$ref": "#/components/schemas/io.ome.v1beta1.InferenceReplicaStatus"}]
    }
    schemas["io.ome.v1beta1.InferenceReplicaStatus"] = {
        "properties": {"instanceStatusEncoding": {}, "instanceStatusColumns": {}}
    }
    assert schema_problems(document) == []


def test_a_document_without_the_kind() -> None:
    assert schema_problems({"components": {"schemas": {}}}) == [
        Problem(
            CRD_SCHEMA,
            "the OpenAPI v3 document of apis/ome.io/v1beta1 has no InferenceReplica schema",
        )
    ]
    assert schema_problems({}) == [
        Problem(CRD_SCHEMA, "the OpenAPI v3 document of apis/ome.io/v1beta1 has no schemas")
    ]


# -- the tally ---------------------------------------------------------------------------------


def replica(name: str, status: Any, namespace: str = "serving") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "status": status}


def columnar(count: int) -> dict[str, Any]:
    return {
        "instanceStatusEncoding": "ColumnarV2",
        "instanceStatusColumns": encode_columnar(rows(count)),
    }


def test_the_tally_counts_by_stored_encoding_and_finds_the_largest_columns() -> None:
    tally = ReplicaTally(max_rows=4)
    tally.add(replica("a", columnar(3)))
    tally.add(replica("b", {"instanceStatuses": rows(9)}))  # a list has no bound
    tally.add(replica("c", None))
    tally.add(replica("d", columnar(4)))
    assert (tally.total, tally.dense_v1, tally.columnar_v2) == (4, 2, 2)
    assert tally.largest_columnar_v2_rows == 4
    assert tally.failures == []
    assert tally.columnar_v2_names == ["serving/a", "serving/d"]


def test_a_damaged_status_is_a_failure_under_the_codecs_reason() -> None:
    damaged = columnar(3)
    damaged["instanceStatusColumns"]["index"] = "0-1"
    tally = ReplicaTally(max_rows=4)
    tally.add(replica("example-engine", damaged))
    (failure,) = tally.failures
    assert (failure.namespace, failure.name, failure.reason) == (
        "serving",
        "example-engine",
        "coverage",
    )
    assert failure.problem == Problem("coverage", f"serving/example-engine: {failure.detail}")
    assert failure.detail == "index holds 2 values for 3 entries: some are missing"
    assert tally.largest_columnar_v2_rows == 0


def test_cardinality_limit_counts_the_declared_rows() -> None:
    tally = ReplicaTally(max_rows=4)
    tally.add(replica("big", columnar(6)))
    (failure,) = tally.failures
    assert failure.reason == "cardinality_limit"
    assert tally.largest_columnar_v2_rows == 6
    unbounded = ReplicaTally(max_rows=None)  # DenseV1 with no bound reads no columns at all
    unbounded.add(replica("small", columnar(1)))
    assert [f.reason for f in unbounded.failures] == ["cardinality_limit"]
    assert unbounded.largest_columnar_v2_rows == 1


def test_an_unknown_encoding_is_counted_only_in_the_total() -> None:
    tally = ReplicaTally(max_rows=4)
    tally.add(replica("odd", {"instanceStatusEncoding": "ColumnarV3"}))
    assert (tally.total, tally.dense_v1, tally.columnar_v2) == (1, 0, 0)
    assert [f.reason for f in tally.failures] == ["encoding"]


def test_rows_decoded_by_the_tally_are_the_codecs() -> None:
    status = columnar(2)
    tally = ReplicaTally(max_rows=4)
    tally.add(replica("a", status))
    assert decode_status(status, max_rows=4) == rows(2)
    assert tally.largest_columnar_v2_rows == 2


def test_columns_under_dense_are_unconverted() -> None:
    tally = ReplicaTally(max_rows=20000)
    for index in range(7):
        tally.add(replica(f"engine-{index}", columnar(1)))
    dense = inventory(instanceStatusEncoding="DenseV1", maxDecodedInstances=20000)
    assert unconverted_problems(tally, inventory=dense) == [
        Problem(
            UNCONVERTED,
            "7 InferenceReplicas are still stored as ColumnarV2 under DenseV1: serving/engine-0, "
            "serving/engine-1, serving/engine-2, serving/engine-3, serving/engine-4 and 2 more",
        )
    ]
    assert unconverted_problems(tally, inventory=inventory()) == []  # normal under ColumnarV2


# -- a cluster that can't be reached is NO-GO, not a crash -------------------------------------


async def test_a_missing_kubeconfig_is_a_kubeconfig_problem(tmp_path: Path) -> None:
    document = copy.deepcopy(INVENTORY)
    document["clusters"][0]["kubeconfig"] = str(tmp_path / "absent")
    checked = parse_inventory(document)
    report = await check_cluster(checked.clusters[0], inventory=checked)
    assert (report.name, report.verdict, report.replicas) == ("prod-east", "NO-GO", None)
    (problem,) = report.problems
    assert problem.reason == KUBECONFIG
    assert problem.detail.startswith(f"cannot load context east from {tmp_path / 'absent'}: ")


# -- the shell, with a scripted API server ------------------------------------------------------


class ScriptedClient:
    """Answers GETs by path from a table: a value, or an exception to raise."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.config = type("Config", (), {"host": "https://10.0.0.1:6443"})()
        self.paths: list[str] = []

    async def __aenter__(self) -> ScriptedClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def request(self, method: str, path: str, **_: Any) -> Any:
        assert method == "GET"
        self.paths.append(path)
        answer = self.answers[path.split("?", maxsplit=1)[0]]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        return await self.request("GET", resource.path(namespace, name))

    async def list_page(self, resource: Any, namespace: str | None = None, **params: Any) -> Any:
        pages = self.answers[resource.path(namespace)]
        self.paths.append(f"{resource.path(namespace)}?limit={params['limit']}")
        page = pages[int(params["_continue"] or 0)]
        if isinstance(page, BaseException):
            raise page
        return page


DEPLOYMENT_PATH = "/apis/apps/v1/namespaces/ome/deployments/ome-controller-manager"
CONFIGMAP_PATH = "/api/v1/namespaces/ome/configmaps/inferenceservice-config"
LIST_PATH = "/apis/ome.io/v1beta1/inferencereplicas"


def healthy() -> dict[str, Any]:
    both = {"instanceStatusEncoding": {}, "instanceStatusColumns": {}}
    return {
        DEPLOYMENT_PATH: deployment({"name": "manager", "image": "ome/ome-manager:v1.3.0"}),
        CONFIGMAP_PATH: configmap(
            omenativeStatus='{"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 4}'
        ),
        "/openapi/v3": {"paths": {"apis/ome.io/v1beta1": {"serverRelativeURL": URL}}},
        "/openapi/v3/apis/ome.io/v1beta1": openapi(both),
        LIST_PATH: [
            {"items": [replica("a", columnar(2))], "metadata": {"continue": "1"}},
            {"items": [replica("b", None)], "metadata": {}},
        ],
    }


async def scripted_check(
    monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any]
) -> tuple[Any, ScriptedClient]:
    from omed.cli import preflight_checks

    client = ScriptedClient(answers)

    async def connect(cluster: Any, *, timeout: float) -> ScriptedClient:
        return client

    monkeypatch.setattr(preflight_checks, "connect", connect)
    checked = inventory()
    return await check_cluster(checked.clusters[0], inventory=checked), client


async def test_a_healthy_cluster_is_go_and_every_page_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report, client = await scripted_check(monkeypatch, healthy())
    assert (report.verdict, report.problems) == ("GO", ())
    assert report.replicas is not None
    assert (report.replicas.total, report.replicas.largest_columnar_v2_rows) == (2, 2)
    assert client.paths == [
        DEPLOYMENT_PATH,
        CONFIGMAP_PATH,
        "/openapi/v3",
        URL,
        f"{LIST_PATH}?limit=500",
        f"{LIST_PATH}?limit=500",
    ]


async def test_error_answers_become_the_checks_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    from omed.kube.errors import Forbidden, NotFound

    answers = healthy()
    answers[DEPLOYMENT_PATH] = Forbidden(403, "Forbidden", "deployments.apps is forbidden")
    answers[CONFIGMAP_PATH] = NotFound(404, "NotFound", "not found")
    answers["/openapi/v3"] = {"paths": {}}
    answers[LIST_PATH] = [NotFound(404, "NotFound", "404 page not found")]
    report, _ = await scripted_check(monkeypatch, answers)
    assert report.problems == (
        Problem(
            MANAGER_IMAGE,
            "cannot read deployment ome/ome-controller-manager: 403 Forbidden: "
            "deployments.apps is forbidden",
        ),
        Problem(CONFIG_BLOCK, "configmap ome/inferenceservice-config not found"),
        Problem(
            CRD_SCHEMA,
            "OpenAPI v3 discovery has no apis/ome.io/v1beta1: the InferenceReplica CRD is not "
            "installed",
        ),
        Problem("replica_list", "the API server doesn't serve inferencereplicas.ome.io/v1beta1"),
    )
    assert report.replicas is None


async def test_a_lost_connection_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp

    answers = healthy()
    answers["/openapi/v3"] = aiohttp.ServerDisconnectedError()
    report, _ = await scripted_check(monkeypatch, answers)
    assert report.problems == (
        Problem("unreachable", "cannot reach https://10.0.0.1:6443: Server disconnected"),
    )
    assert report.replicas is None


async def test_anything_else_stops_only_that_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = healthy()
    answers[LIST_PATH] = [RuntimeError("exec plugin said no")]
    report, _ = await scripted_check(monkeypatch, answers)
    assert report.problems == (
        Problem("check_failed", "the check stopped: RuntimeError: exec plugin said no"),
    )


# -- decode failures are the manager's ----------------------------------------------------------


def with_bad_time(status: dict[str, Any]) -> dict[str, Any]:
    """ColumnarV2 columns the codec decodes (any string is a time to it) but whose row 1 the
    InstanceStatus model refuses."""
    bad = rows(3)
    bad[1] = {**bad[1], "readySince": "not-a-time"}
    return {**status, "instanceStatusColumns": encode_columnar(bad)}


def test_a_row_the_manager_refuses_is_a_row_shape_failure() -> None:
    status = with_bad_time(columnar(3))
    assert len(decode_status(status, max_rows=4)) == 3  # the codec alone accepts it
    tally = ReplicaTally(max_rows=4)
    tally.add(replica("example-engine", status))
    tally.add(replica("listed", {"instanceStatuses": [{"index": 0, "readySince": "yesterday"}]}))
    assert [failure.problem for failure in tally.failures] == [
        Problem(
            "row_shape",
            "serving/example-engine: the row of index 1 is not a valid Instance row: readySince: "
            "Input should be a valid datetime or date, invalid character in year "
            '(got "not-a-time")',
        ),
        Problem(
            "row_shape",
            "serving/listed: the row of index 0 is not a valid Instance row: readySince: "
            'Input should be a valid datetime or date, input is too short (got "yesterday")',
        ),
    ]
    assert (tally.columnar_v2, tally.largest_columnar_v2_rows) == (1, 0)


async def test_a_row_the_manager_refuses_makes_the_cluster_no_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers = healthy()
    answers[LIST_PATH] = [{"items": [replica("a", with_bad_time(columnar(3)))]}]
    report, _ = await scripted_check(monkeypatch, answers)
    assert report.verdict == "NO-GO"
    assert [problem.reason for problem in report.problems] == ["row_shape"]


class Events:
    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.messages: list[str] = []

    def event(self, obj: Any, *, type: str, reason: str, message: str) -> None:
        self.reasons.append(reason)
        self.messages.append(message)


class OneReplica:
    def __init__(self, obj: dict[str, Any] | None = None) -> None:
        self.obj = obj

    def get(self, key: str) -> Any:
        return self.obj

    def by_index(self, index: str, value: str) -> list[Any]:
        return []


def damaged_statuses() -> list[Any]:
    coverage = columnar(3)
    coverage["instanceStatusColumns"]["index"] = "0-1"
    both = columnar(2)
    both["instanceStatuses"] = rows(1)
    return [
        pytest.param(with_bad_time(columnar(3)), id="columns-bad-time"),
        pytest.param({"instanceStatuses": [{"index": 0, "readySince": "x"}]}, id="list-bad-time"),
        pytest.param({"instanceStatuses": [{"index": 0, "podCount": -1}]}, id="list-negative"),
        pytest.param(coverage, id="coverage"),
        pytest.param(columnar(6), id="cardinality_limit"),
        pytest.param(both, id="both-forms"),
        pytest.param({"instanceStatusEncoding": "ColumnarV3"}, id="encoding"),
    ]


async def manager_events(obj: dict[str, Any]) -> Events:
    """The Warning events of one reconcile of ``obj`` by the manager's own reconciler, under
    ColumnarV2 with a bound of 4 (a status it can't read sends no request at all)."""
    from omed.clock import FakeClock
    from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings
    from omed.controllers.inferencereplica.core.model import PlanSettings
    from omed.controllers.inferencereplica.shell.expectations import Expectations
    from omed.controllers.inferencereplica.shell.reconciler import InferenceReplicaReconciler

    clock = FakeClock()
    events = Events()
    manager = InferenceReplicaReconciler(
        client=None,  # type: ignore[arg-type]  # any request would fail the test
        replicas=OneReplica(obj),
        pods=OneReplica(),
        events=events,
        settings=PlanSettings(),
        expectations=Expectations(clock=clock),
        clock=clock,
        status_encoding=StatusEncodingSettings(encoding="ColumnarV2", max_decoded_instances=4),
    )
    with pytest.raises(TerminalError):  # left alone: not retried until it is edited
        await manager.reconcile("serving/example-engine")
    return events


def managed_replica(status: dict[str, Any]) -> dict[str, Any]:
    from omed.controllers.inferencereplica.core import names

    template = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "namespace": "serving",
            "name": "example-engine",
            "uid": "irep-uid",
            "generation": 1,
            "resourceVersion": "5",
            "finalizers": [names.FINALIZER],
        },
        "spec": {
            "component": "engine",
            "replicas": 3,
            "runners": [{"name": "default", "template": template}],
        },
        "status": copy.deepcopy(status),
    }


@pytest.mark.parametrize("status", damaged_statuses())
async def test_the_fleet_check_flags_exactly_what_the_manager_wont_manage(
    status: dict[str, Any],
) -> None:
    obj = managed_replica(status)
    events = await manager_events(obj)  # the manager leaves it alone, with one Warning
    tally = ReplicaTally(max_rows=4)
    tally.add(obj)
    (failure,) = tally.failures  # and the fleet check flags it, with the same reason
    assert events.reasons == ["InstanceStatusDecodeFailed"]
    assert events.messages == [
        "InferenceReplica serving/example-engine: per-Instance status cannot be decoded "
        f"({failure.reason})"
    ]


async def test_a_status_the_manager_reads_is_not_flagged() -> None:
    obj = managed_replica(columnar(3))
    tally = ReplicaTally(max_rows=4)
    tally.add(obj)
    assert tally.failures == []
    from omed.controllers.inferencereplica.core.status import decode_rows_from_status

    assert len(decode_rows_from_status(obj["status"], max_rows=4)) == 3


# -- answers that aren't JSON objects, local errors --------------------------------------------

PROXY_PAGE = b"<html><body><h1>Authentication required</h1></body></html>"


async def test_a_non_json_answer_is_named_not_crashed_on(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = healthy()
    answers[DEPLOYMENT_PATH] = PROXY_PAGE
    answers[CONFIGMAP_PATH] = ["not", "an", "object"]
    answers["/openapi/v3"] = None
    report, _ = await scripted_check(monkeypatch, answers)
    assert report.problems == (
        Problem(
            MANAGER_IMAGE,
            "cannot read deployment ome/ome-controller-manager: the API server answered GET "
            f'{DEPLOYMENT_PATH} with a body that is not JSON (58 bytes: "<html><body><h1>'
            'Authentication required</h1></body></html>"), not a JSON object',
        ),
        Problem(
            CONFIG_BLOCK,
            "cannot read configmap ome/inferenceservice-config: the API server answered GET "
            f"{CONFIGMAP_PATH} with a JSON list, not a JSON object",
        ),
        Problem(
            CRD_SCHEMA,
            "cannot read OpenAPI v3 discovery (GET /openapi/v3): the API server answered GET "
            "/openapi/v3 with an empty body, not a JSON object",
        ),
    )
    assert report.replicas is not None and report.replicas.total == 2


@pytest.mark.parametrize(
    ("page", "detail"),
    [
        (
            PROXY_PAGE * 3,
            f"the API server answered GET {LIST_PATH} with a body that is not JSON (174 bytes: "
            '"<html><body><h1>Authentication required</h1></body></html><h..."), '
            "not a JSON object",
        ),
        (
            {"items": "none"},
            f"the API server answered GET {LIST_PATH} with items that are a JSON string, "
            "not a list",
        ),
        (
            {"items": [replica("a", None), 7]},
            f"the API server answered GET {LIST_PATH} with items[1] that is a JSON number, "
            "not a JSON object",
        ),
    ],
)
async def test_a_list_page_that_cant_be_read_is_no_go_not_an_empty_fleet(
    monkeypatch: pytest.MonkeyPatch, page: Any, detail: str
) -> None:
    answers = healthy()
    answers[LIST_PATH] = [page]
    report, _ = await scripted_check(monkeypatch, answers)
    assert report.problems == (Problem("replica_list", f"cannot list InferenceReplicas: {detail}"),)
    assert report.replicas is None


@pytest.mark.parametrize(
    "error",
    [
        FileNotFoundError(2, "No such file or directory", "/etc/ome/certs/east.crt"),
        PermissionError(13, "Permission denied", "/etc/ome/tokens/east"),
        ssl.SSLError(9, "[SSL] PEM lib (_ssl.c:3874)"),
    ],
)
async def test_a_local_file_error_is_a_kubeconfig_problem_not_unreachable(
    monkeypatch: pytest.MonkeyPatch, error: OSError
) -> None:
    answers = healthy()
    answers[CONFIGMAP_PATH] = error
    report, _ = await scripted_check(monkeypatch, answers)
    assert report.problems == (
        Problem(KUBECONFIG, f"cannot use context east from /nowhere/prod-east: {error}"),
    )


@pytest.mark.parametrize(
    "error",
    [
        TimeoutError(),
        ConnectionResetError(104, "Connection reset by peer"),
        socket.gaierror(-2, "Name or service not known"),
    ],
)
async def test_network_errors_stay_unreachable(
    monkeypatch: pytest.MonkeyPatch, error: OSError
) -> None:
    answers = healthy()
    answers[CONFIGMAP_PATH] = error
    report, _ = await scripted_check(monkeypatch, answers)
    assert [problem.reason for problem in report.problems] == ["unreachable"]
    assert report.problems[0].detail.startswith("cannot reach https://10.0.0.1:6443: ")


def test_what_came_names_each_json_type_as_docs_preflight_lists_it() -> None:
    from omed.cli.preflight_checks import _body

    answers = {
        None: "an empty body",
        True: "a JSON boolean",
        3: "a JSON number",
        1.5: "a JSON number",
    }
    assert {a: _body(a) for a in answers} == answers
    assert [_body("x"), _body([1]), _body({"a": 1}), _body((1,))] == [
        "a JSON string",
        "a JSON list",
        "a JSON object",
        "a tuple",
    ]
