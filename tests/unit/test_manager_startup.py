"""The manager's start-up checks: their decisions and exact messages, against fake reads."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.config import load_startup_config
from omed.kube.errors import Forbidden, NotFound, ServerError
from omed.kube.resources import CONFIGMAPS, CRDS
from omed.manager.startup import (
    INFERENCE_REPLICA_CRD,
    MSG_CONFIGMAP_UNREADABLE,
    MSG_SCHEMA_PREFLIGHT_FAILED,
    StartupFailure,
    check_status_schema,
    detect_pod_group_crd,
    detect_policy_crds,
    load_configmap_startup,
    log_level,
    manager_namespace,
    split_bind_address,
    status_preflight,
    status_representation,
)

ROOT = Path(__file__).resolve().parents[2]

VALID = {
    "omenativeStatus": json.dumps(
        {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 20000}
    ),
    "eventRecorder": json.dumps({"burstSize": 400, "refillInterval": "5s"}),
}


class FakeReader:
    """Answers ``get`` from a dict keyed by (plural, namespace, name), or raises."""

    def __init__(self, objects: dict[tuple[str, str | None, str], Any] | None = None) -> None:
        self.objects = objects or {}
        self.errors: dict[tuple[str, str | None, str], Exception] = {}
        self.reads: list[tuple[str, str | None, str]] = []

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        key = (resource.plural, namespace, name)
        self.reads.append(key)
        if key in self.errors:
            raise self.errors[key]
        if key not in self.objects:
            raise NotFound(404, "NotFound", f'{resource.plural} "{name}" not found')
        return copy.deepcopy(self.objects[key])


def configmap(data: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "inferenceservice-config"}, "data": data}


def generated_crd() -> dict[str, Any]:
    path = ROOT / "deploy" / "crds" / f"{INFERENCE_REPLICA_CRD}.yaml"
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    return crd


# --- pure helpers -----------------------------------------------------------------------------


def test_manager_namespace_is_pod_namespace_else_ome() -> None:
    assert manager_namespace({"POD_NAMESPACE": "serving"}) == "serving"
    assert manager_namespace({"POD_NAMESPACE": ""}) == "ome"
    assert manager_namespace({}) == "ome"


@pytest.mark.parametrize(
    ("level", "threshold"),
    [
        ("debug", logging.DEBUG),
        ("info", logging.INFO),
        ("error", logging.ERROR),
        ("panic", logging.CRITICAL),
        (1, logging.DEBUG),
        (3, logging.DEBUG - 2),
        (50, 1),
    ],
)
def test_zap_levels_map_to_logging_thresholds(level: Any, threshold: int) -> None:
    assert log_level(level) == threshold


@pytest.mark.parametrize(
    ("address", "bind"),
    [
        (":8080", (None, 8080)),
        ("127.0.0.1:9000", ("127.0.0.1", 9000)),
        ("[::1]:8081", ("::1", 8081)),
        ("0", None),
        ("", None),
    ],
)
def test_bind_addresses(address: str, bind: tuple[str | None, int] | None) -> None:
    assert split_bind_address(address) == bind


def test_status_representation_logs_zero_without_a_bound() -> None:
    dense = load_startup_config(
        {"omenativeStatus": json.dumps({"instanceStatusEncoding": "DenseV1"})}
    )
    assert status_representation(dense) == {
        "instanceStatusEncoding": "DenseV1",
        "maxDecodedInstances": 0,
    }
    columnar = load_startup_config(VALID)
    assert status_representation(columnar) == {
        "instanceStatusEncoding": "ColumnarV2",
        "maxDecodedInstances": 20000,
    }


# --- the status schema preflight ---------------------------------------------------------------


def test_the_generated_crd_passes_the_preflight() -> None:
    check_status_schema(generated_crd())


def _v1beta1(crd: dict[str, Any]) -> dict[str, Any]:
    version: dict[str, Any] = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
    return version


@pytest.mark.parametrize("field", ["instanceStatusEncoding", "instanceStatusColumns"])
def test_a_crd_without_a_status_field_fails_the_preflight(field: str) -> None:
    crd = generated_crd()
    del _v1beta1(crd)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][field]
    with pytest.raises(StartupFailure) as caught:
        check_status_schema(crd)
    assert caught.value.message == MSG_SCHEMA_PREFLIGHT_FAILED == "status schema preflight failed"
    assert caught.value.error == (
        f"CustomResourceDefinition inferencereplicas.ome.io is too old: its v1beta1 schema has "
        f"no status.{field}; upgrade the ome-crd chart before ome-resources"
    )
    assert caught.value.exit_code == 1


def test_a_crd_without_either_field_names_both() -> None:
    crd = generated_crd()
    props = _v1beta1(crd)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    del props["instanceStatusEncoding"], props["instanceStatusColumns"]
    with pytest.raises(StartupFailure, match=r"no status\.instanceStatusEncoding or status\."):
        check_status_schema(crd)


def test_a_crd_that_does_not_serve_v1beta1_fails_the_preflight() -> None:
    crd = generated_crd()
    _v1beta1(crd)["served"] = False
    with pytest.raises(StartupFailure, match="it doesn't serve v1beta1"):
        check_status_schema(crd)
    crd["spec"]["versions"] = [dict(_v1beta1(crd), name="v1alpha1", served=True)]
    with pytest.raises(StartupFailure, match="it doesn't serve v1beta1"):
        check_status_schema(crd)


def test_a_crd_without_the_status_subresource_fails_the_preflight() -> None:
    crd = generated_crd()
    _v1beta1(crd)["subresources"] = {}
    with pytest.raises(StartupFailure, match="v1beta1 has no status subresource"):
        check_status_schema(crd)


async def test_a_missing_crd_fails_the_preflight() -> None:
    with pytest.raises(StartupFailure) as caught:
        await status_preflight(FakeReader())
    assert caught.value.message == MSG_SCHEMA_PREFLIGHT_FAILED
    assert caught.value.error == (
        "CustomResourceDefinition inferencereplicas.ome.io not found; "
        "install the ome-crd chart before ome-resources"
    )


async def test_an_unreadable_crd_fails_the_preflight_with_the_api_error() -> None:
    reader = FakeReader()
    reader.errors[("customresourcedefinitions", None, INFERENCE_REPLICA_CRD)] = Forbidden(
        403, "Forbidden", "cannot get customresourcedefinitions"
    )
    with pytest.raises(StartupFailure) as caught:
        await status_preflight(reader)
    assert caught.value.message == MSG_SCHEMA_PREFLIGHT_FAILED
    assert caught.value.error.startswith("get CustomResourceDefinition inferencereplicas.ome.io: ")
    assert "403 Forbidden: cannot get customresourcedefinitions" in caught.value.error


async def test_the_preflight_reads_the_cluster_crd() -> None:
    reader = FakeReader(
        {("customresourcedefinitions", None, INFERENCE_REPLICA_CRD): generated_crd()}
    )
    await status_preflight(reader)
    assert reader.reads == [(CRDS.plural, None, INFERENCE_REPLICA_CRD)]


# --- the ConfigMap -----------------------------------------------------------------------------


async def test_the_configmap_is_read_from_the_manager_namespace() -> None:
    reader = FakeReader({("configmaps", "serving", "inferenceservice-config"): configmap(VALID)})
    startup = await load_configmap_startup(reader, namespace="serving")
    assert reader.reads == [(CONFIGMAPS.plural, "serving", "inferenceservice-config")]
    assert startup.event_recorder.burst_size == 400
    assert startup.event_recorder.refill_interval == 5.0


async def test_a_missing_configmap_is_a_missing_omenative_status_block() -> None:
    with pytest.raises(StartupFailure) as caught:
        await load_configmap_startup(FakeReader(), namespace="ome")
    assert caught.value.message == "Failed to initialize OMENative status configuration"
    assert caught.value.error == "ConfigMap ome/inferenceservice-config not found"


@pytest.mark.parametrize(
    ("data", "message", "error"),
    [
        (
            {**VALID, "lifecycle": json.dumps({"scaleDownPodBatchSize": "101%"})},
            "Failed to initialize lifecycle scale configuration",
            "validate lifecycle.scaleDownPodBatchSize: invalid lifecycle.scaleDownPodBatchSize "
            '"101%" must be between 1% and 100%',
        ),
        (
            {"eventRecorder": VALID["eventRecorder"]},
            "Failed to initialize OMENative status configuration",
            "ConfigMap inferenceservice-config has no omenativeStatus entry",
        ),
        (
            {**VALID, "eventRecorder": json.dumps({"burstSize": 0})},
            "Failed to initialize event recorder configuration",
            "validate eventRecorder.burstSize: invalid eventRecorder.burstSize 0 "
            "must be a positive integer",
        ),
    ],
)
async def test_a_bad_startup_entry_stops_the_manager_with_its_message(
    data: dict[str, str], message: str, error: str
) -> None:
    reader = FakeReader({("configmaps", "ome", "inferenceservice-config"): configmap(data)})
    with pytest.raises(StartupFailure) as caught:
        await load_configmap_startup(reader, namespace="ome")
    assert (caught.value.message, caught.value.error, caught.value.exit_code) == (
        message,
        error,
        1,
    )


async def test_an_unreadable_configmap_says_what_was_read() -> None:
    reader = FakeReader()
    reader.errors[("configmaps", "ome", "inferenceservice-config")] = ServerError(
        503, "ServiceUnavailable", "the server is currently unable to handle the request"
    )
    with pytest.raises(StartupFailure) as caught:
        await load_configmap_startup(reader, namespace="ome")
    assert caught.value.message == MSG_CONFIGMAP_UNREADABLE
    assert caught.value.error.startswith("get ConfigMap ome/inferenceservice-config: ")
    assert "unable to handle the request" in caught.value.error


async def test_policy_features_follow_their_crds() -> None:
    reader = FakeReader({("customresourcedefinitions", None, "rolloutpolicies.ome.io"): {}})
    reader.errors[("customresourcedefinitions", None, "autoscalerpolicies.ome.io")] = Forbidden(
        403, "Forbidden", "cannot get customresourcedefinitions"
    )
    found, errors = await detect_policy_crds(reader)
    assert found == {"rollout_policy": True, "autoscaler_policy": False}
    assert len(errors) == 1
    assert errors[0].startswith("get CustomResourceDefinition autoscalerpolicies.ome.io: ")
    found, errors = await detect_policy_crds(FakeReader())
    assert found == {"rollout_policy": False, "autoscaler_policy": False}
    assert errors == []


async def test_pod_groups_follow_the_pod_group_crd_serving_v1alpha1() -> None:
    key = ("customresourcedefinitions", None, "podgroups.scheduling.x-k8s.io")
    served = {"spec": {"versions": [{"name": "v1alpha1", "served": True, "storage": True}]}}
    assert await detect_pod_group_crd(FakeReader({key: served})) == (
        True,
        "CustomResourceDefinition podgroups.scheduling.x-k8s.io found",
    )
    assert await detect_pod_group_crd(FakeReader()) == (
        False,
        "CustomResourceDefinition podgroups.scheduling.x-k8s.io not found",
    )
    other = {"spec": {"versions": [{"name": "v1beta1", "served": True}]}}
    found, why = await detect_pod_group_crd(FakeReader({key: other}))
    assert not found and why.endswith("serves no v1alpha1")
    reader = FakeReader()
    reader.errors[key] = Forbidden(403, "Forbidden", "cannot get customresourcedefinitions")
    found, why = await detect_pod_group_crd(reader)
    assert not found
    assert why.startswith("get CustomResourceDefinition podgroups.scheduling.x-k8s.io: ")
