"""The InferenceService defaulter: the deployment mode and replica defaults from ``deploy``."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from webhook_world import Request

from omed.config import DeployConfig, ReconcileConfigError
from omed.webhooks.defaulting import (
    BUILTIN_MIN_REPLICAS,
    WARN_NO_DEFAULTS,
    InferenceServiceDefaulter,
    default_patch,
)

MODE = "/metadata/annotations/ome.io~1deploymentMode"


def deploy(
    mode: str | None = None, *, low: int | None = None, high: int | None = None
) -> DeployConfig:
    """The ``deploy`` entry as the ConfigMap would hold it."""
    entry: dict[str, Any] = {"defaultDeploymentMode": mode}
    if low is not None or high is not None:
        entry["replicas"] = {"minReplicas": low, "maxReplicas": high}
    return DeployConfig.model_validate(entry)


def bare(isvc: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(isvc)
    del obj["spec"]["deploymentMode"]
    for component in ("engine", "decoder", "router"):
        obj["spec"][component].pop("minReplicas")
        obj["spec"][component].pop("maxReplicas")
    return obj


def metadata_ops(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [op for op in ops if op["path"].startswith("/metadata")]


def test_mode_defaulted_into_the_annotation(isvc: dict) -> None:
    obj = bare(isvc)
    assert metadata_ops(default_patch(obj, deploy=deploy("RawDeployment"), operation="CREATE")) == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {"ome.io/deploymentMode": "RawDeployment"},
        }
    ]
    obj["metadata"]["annotations"] = {"team": "a"}
    assert metadata_ops(default_patch(obj, deploy=deploy("OMENative"), operation="CREATE")) == [
        {"op": "add", "path": MODE, "value": "OMENative"}
    ]


@pytest.mark.parametrize(
    ("where", "mode", "operation"),
    [
        ("spec", "RawDeployment", "CREATE"),  # the spec sets one
        ("annotation", "RawDeployment", "CREATE"),  # the annotation sets one
        (None, "Hybrid", "CREATE"),  # unknown mode in the ConfigMap
        (None, None, "CREATE"),  # the ConfigMap sets none
        (None, "RawDeployment", "UPDATE"),  # never on UPDATE
    ],
)
def test_mode_not_defaulted(
    isvc: dict, where: str | None, mode: str | None, operation: str
) -> None:
    obj = bare(isvc)
    if where == "spec":
        obj["spec"]["deploymentMode"] = "OMENative"
    elif where == "annotation":
        obj["metadata"]["annotations"] = {"ome.io/deploymentMode": "OMENative"}
    assert metadata_ops(default_patch(obj, deploy=deploy(mode), operation=operation)) == []


def test_replicas_defaulted_per_component(isvc: dict) -> None:
    obj = bare(isvc)
    obj["spec"]["engine"]["minReplicas"] = 4
    obj["spec"]["router"]["maxReplicas"] = 3
    del obj["spec"]["decoder"]
    ops = default_patch(obj, deploy=deploy(low=1, high=2), operation="UPDATE")
    assert ops == [
        {"op": "add", "path": "/spec/engine/maxReplicas", "value": 4},  # raised to min
        {"op": "add", "path": "/spec/router/minReplicas", "value": 1},
    ]


def test_default_min_lowered_to_own_max(isvc: dict) -> None:
    obj = bare(isvc)
    obj["spec"]["engine"]["maxReplicas"] = 2
    ops = default_patch(obj, deploy=deploy(low=3), operation="CREATE")
    assert {"op": "add", "path": "/spec/engine/minReplicas", "value": 2} in ops
    assert {"op": "add", "path": "/spec/router/minReplicas", "value": 3} in ops


def test_null_fields_are_defaulted_and_set_ones_kept(isvc: dict) -> None:
    isvc["spec"]["engine"]["minReplicas"] = None
    ops = default_patch(isvc, deploy=deploy(low=2, high=9), operation="CREATE")
    assert ops == [{"op": "add", "path": "/spec/engine/minReplicas", "value": 2}]


def test_without_replica_entry_min_defaults_to_one(isvc: dict) -> None:
    assert default_patch(bare(isvc), deploy=deploy(), operation="CREATE") == [
        {"op": "add", "path": f"/spec/{component}/minReplicas", "value": BUILTIN_MIN_REPLICAS}
        for component in ("engine", "decoder", "router")
    ]
    assert BUILTIN_MIN_REPLICAS == 1
    only_max = default_patch(bare(isvc), deploy=deploy(high=5), operation="CREATE")
    assert {"op": "add", "path": "/spec/engine/minReplicas", "value": 1} in only_max
    assert {"op": "add", "path": "/spec/engine/maxReplicas", "value": 5} in only_max


def test_malformed_objects_are_left_to_the_validator(isvc: dict) -> None:
    assert (
        default_patch(
            {"metadata": {}, "spec": "x"},
            deploy=deploy("OMENative", low=1, high=2),
            operation="CREATE",
        )
        == []
    )
    isvc["metadata"]["annotations"] = "x"
    assert default_patch(isvc, deploy=deploy("OMENative"), operation="CREATE") == []


async def test_webhook_patches(request_for: Request, isvc: dict) -> None:
    async def source() -> DeployConfig:
        return deploy("OMENative", low=1, high=1)

    answer = await InferenceServiceDefaulter(deploy_config=source).admit(request_for(bare(isvc)))
    assert answer.allowed and answer.patch is not None
    assert answer.patch[0] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {"ome.io/deploymentMode": "OMENative"},
    }
    assert len(answer.patch) == 7


async def test_webhook_skips_deletes_and_deleting(request_for: Request, isvc: dict) -> None:
    calls = 0

    async def source() -> DeployConfig:
        nonlocal calls
        calls += 1
        return deploy("OMENative", low=1, high=1)

    hook = InferenceServiceDefaulter(deploy_config=source)
    assert (await hook.admit(request_for(None, operation="DELETE", old=isvc))).patch is None
    obj = bare(isvc)
    obj["metadata"]["deletionTimestamp"] = "2026-09-28T10:12:04Z"
    assert (await hook.admit(request_for(obj, operation="UPDATE", old=obj))).patch is None
    assert calls == 0


async def test_webhook_admits_unchanged_when_config_fails(request_for: Request, isvc: dict) -> None:
    async def broken() -> DeployConfig:
        raise ReconcileConfigError("deploy", "not a JSON object")

    answer = await InferenceServiceDefaulter(deploy_config=broken).admit(request_for(bare(isvc)))
    assert answer.allowed and answer.patch is None
    assert answer.warnings == (
        WARN_NO_DEFAULTS
        + "invalid deploy entry in ConfigMap inferenceservice-config: not a JSON object",
    )


async def test_webhook_admits_unchanged_when_config_is_slow(
    request_for: Request, isvc: dict
) -> None:
    never = asyncio.Event()

    async def stuck() -> DeployConfig:
        await never.wait()
        raise AssertionError("unreachable")

    hook = InferenceServiceDefaulter(deploy_config=stuck, timeout=0.01)
    answer = await hook.admit(request_for(bare(isvc)))
    assert answer.allowed and answer.patch is None
    assert answer.warnings == (WARN_NO_DEFAULTS + "reading it took more than 0.01s",)
