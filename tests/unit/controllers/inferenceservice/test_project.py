"""The projection from an InferenceService and its runtime to InferenceReplicas.

The core reads models; these tests write the objects as the API server holds them (JSON), so
the adapters below read them through the shell's cache boundary and give the wanted replicas
back in their wire form."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any, cast

import pytest

from omed.api.component import ComponentSpec
from omed.controllers.inferencereplica.core.model import RunnerShape
from omed.controllers.inferencereplica.core.podtemplate import revision_of
from omed.controllers.inferenceservice.core import owned
from omed.controllers.inferenceservice.core import project as core
from omed.controllers.inferenceservice.core import status as core_status
from omed.controllers.inferenceservice.core.mode import resolve_mode_json as resolve_mode
from omed.controllers.inferenceservice.core.owned import ANNOTATION_SPEC_HASH, merge_diff
from omed.controllers.inferenceservice.core.project import ProjectionError, merge_container
from omed.controllers.inferenceservice.shell.read import (
    read_replica,
    read_runtime_spec,
    read_service,
)

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)

RUNTIME: dict[str, Any] = {
    "metadata": {"name": "srt"},
    "spec": {
        "deploymentMode": "OMENative",
        "engineConfig": {
            "nodeSelector": {"pool": "gpu"},
            "runner": {
                "name": "ome-container",
                "image": "ome/srt:1",
                "args": ["--port", "8080"],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4"}},
            },
        },
        "decoderConfig": {
            "leader": {"runner": {"name": "ome-container", "image": "ome/srt:1"}},
            "worker": {"size": 2, "runner": {"name": "ome-container", "image": "ome/srt:1"}},
        },
    },
}


def project(
    isvc: Mapping[str, Any], runtime: Mapping[str, Any] | None, *, default_mode: str | None
) -> Any:
    projection = core.project(
        read_service(isvc), read_runtime_spec(runtime), default_mode=default_mode
    )
    wire = {name: owned.replica_json(r) for name, r in projection.replicas.items()}
    return dataclasses.replace(projection, replicas=cast(Any, wire))  # the wire form


def needs_update(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return owned.needs_update(read_replica(stored), read_replica(wanted))


def update_patch(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    return owned.update_patch(read_replica(stored), read_replica(wanted))


def instance_count(component: Mapping[str, Any]) -> int:
    # Built without validation: the model refuses maxReplicas below minReplicas (so does the
    # webhook), and the count still has an answer for one stored before either ran.
    return core.instance_count(
        ComponentSpec.model_construct(
            min_replicas=component.get("minReplicas"), max_replicas=component.get("maxReplicas")
        )
    )


def replica_readiness(component: str, irep: Mapping[str, Any] | None) -> Any:
    return core_status.replica_readiness(component, read_replica(irep) if irep else None)


def build_status(*, isvc: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    return core_status.build_status(isvc=read_service(isvc), **kwargs)


def isvc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "chat", "namespace": "prod", "uid": "u-1", "generation": 3},
        "spec": {"runtime": {"name": "srt"}, **spec},
    }


def test_mode_precedence() -> None:
    base = isvc(deploymentMode="RawDeployment")
    assert resolve_mode(base, RUNTIME, "OMENative") == ("RawDeployment", "ServiceSpec")
    base["metadata"]["annotations"] = {"ome.io/deploymentMode": "OMENative"}
    assert resolve_mode(base, RUNTIME, None) == ("OMENative", "Annotation")
    assert resolve_mode(isvc(), RUNTIME, "RawDeployment") == ("OMENative", "Runtime")
    assert resolve_mode(isvc(), None, "OMENative") == ("OMENative", "ConfigMap")
    assert resolve_mode(isvc(), None, None) == ("RawDeployment", "Default")


def test_non_native_modes_get_no_replicas() -> None:
    projection = project(
        isvc(deploymentMode="RawDeployment", engine={}), RUNTIME, default_mode=None
    )
    assert projection.replicas == {}


def test_replica_refs_front_without_writing() -> None:
    projection = project(
        isvc(replicaRefs=[{"name": "pool-a"}], engine={}), RUNTIME, default_mode=None
    )
    assert projection.replicas == {} and projection.fronted == ("pool-a",)


@pytest.mark.parametrize(
    ("component", "count"),
    [
        ({}, 1),
        ({"minReplicas": 4, "maxReplicas": 4}, 4),
        ({"minReplicas": 0}, 0),
        ({"minReplicas": 9, "maxReplicas": 3}, 3),
        ({"minReplicas": 5, "maxReplicas": 0}, 5),
    ],
)
def test_instance_count(component: dict[str, Any], count: int) -> None:
    assert instance_count(component) == count


def test_single_pod_template_merges_runtime_and_overrides() -> None:
    engine = {
        "minReplicas": 4,
        "maxReplicas": 4,
        "runner": {
            "image": "ome/srt:2",
            "env": [{"name": "B", "value": "x"}, {"name": "C", "value": "3"}],
            "resources": {"limits": {"nvidia.com/gpu": "2"}},
        },
        "lifecycle": {"updateStrategy": {"type": "RecreatePod"}},
    }
    projection = project(isvc(engine=engine), RUNTIME, default_mode=None)
    irep = projection.replicas["engine"]
    assert irep["metadata"]["name"] == "chat-engine"
    assert irep["metadata"]["labels"]["ome.io/inferenceservice"] == "chat"
    assert irep["metadata"]["annotations"]["ome.io/controller-write"] == "true"
    owner = irep["metadata"]["ownerReferences"][0]
    assert owner["uid"] == "u-1" and owner["controller"] is True
    spec = irep["spec"]
    assert spec["parentRef"] == {"name": "chat"} and spec["replicas"] == 4
    assert spec["lifecycle"] == {"updateStrategy": {"type": "RecreatePod"}}
    [runner] = spec["runners"]
    assert runner["name"] == "default" and runner["size"] == 1
    pod = runner["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    [container] = pod["containers"]
    assert container["image"] == "ome/srt:2"
    assert container["args"] == ["--port", "8080"]
    assert container["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "x"},
        {"name": "C", "value": "3"},
    ]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2", "cpu": "4"}


def test_multi_pod_runners() -> None:
    projection = project(
        isvc(decoder={"minReplicas": 2, "maxReplicas": 2}), RUNTIME, default_mode=None
    )
    runners = projection.replicas["decoder"]["spec"]["runners"]
    assert [(r["name"], r["size"]) for r in runners] == [("leader", 1), ("worker", 2)]


def test_missing_image_is_a_projection_error() -> None:
    with pytest.raises(ProjectionError) as caught:
        project(
            isvc(deploymentMode="OMENative", engine={"minReplicas": 1}), None, default_mode=None
        )
    assert caught.value.reason == "RuntimeUnresolved"


def test_merge_container_does_not_mutate_inputs() -> None:
    base = {"env": [{"name": "A", "value": "1"}]}
    frozen = copy.deepcopy(base)
    merge_container(base, {"env": [{"name": "A", "value": "2"}]})
    assert base == frozen


def test_unchanged_projection_needs_no_update_and_a_change_does() -> None:
    wanted = project(isvc(engine={"minReplicas": 1}), RUNTIME, default_mode=None).replicas["engine"]
    stored = copy.deepcopy(wanted)
    stored["metadata"]["resourceVersion"] = "7"
    stored["spec"]["runners"][0]["template"]["spec"]["pruned"] = "by the apiserver"
    assert not needs_update(stored, wanted)
    changed = project(isvc(engine={"minReplicas": 2}), RUNTIME, default_mode=None).replicas[
        "engine"
    ]
    assert needs_update(stored, changed)
    patch = update_patch(stored, changed)
    # Only what differs, guarded by the version read; the spec made equal to the wanted one.
    digest = changed["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    assert patch == {
        "metadata": {"resourceVersion": "7", "annotations": {ANNOTATION_SPEC_HASH: digest}},
        "spec": {"replicas": 2, "runners": changed["spec"]["runners"]},
    }


def test_the_update_patch_leaves_what_the_controller_doesnt_own() -> None:
    wanted = project(isvc(engine={"minReplicas": 1}), RUNTIME, default_mode=None).replicas["engine"]
    stored = copy.deepcopy(wanted)
    meta = stored["metadata"]
    meta["resourceVersion"] = "7"
    meta["annotations"]["team.example.com/owner"] = "search"
    meta["labels"]["team.example.com/tier"] = "gold"
    extra = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm-uid"}
    meta["ownerReferences"].append(extra)
    stored["spec"]["lifecycle"] = {"readyPolicy": "None"}  # no longer wanted: removed
    changed = project(isvc(engine={"minReplicas": 2}), RUNTIME, default_mode=None).replicas[
        "engine"
    ]
    patch = update_patch(stored, changed)
    assert set(patch["metadata"]) == {"resourceVersion", "annotations"}
    assert list(patch["metadata"]["annotations"]) == [ANNOTATION_SPEC_HASH]
    assert patch["spec"]["lifecycle"] is None
    assert patch["spec"]["replicas"] == 2
    # A controller reference to another owner is replaced, other references are kept.
    stored["metadata"]["ownerReferences"][0]["uid"] = "an-earlier-service"
    owners = update_patch(stored, changed)["metadata"]["ownerReferences"]
    assert owners == [*changed["metadata"]["ownerReferences"], extra]


def test_merge_diff_removes_nested_keys_and_replaces_lists_whole() -> None:
    old = {"a": {"b": 1, "c": 2}, "l": [1, 2], "gone": True, "same": {"x": 1}}
    new = {"a": {"b": 1}, "l": [1], "same": {"x": 1}, "added": {"y": None}}
    assert merge_diff(old, new) == {"a": {"c": None}, "l": [1], "gone": None, "added": {"y": None}}
    assert merge_diff(new, new) == {}


def test_replicas_are_created_with_the_replica_controllers_finalizer() -> None:
    wanted = project(isvc(engine={"minReplicas": 1}), RUNTIME, default_mode=None).replicas["engine"]
    assert wanted["metadata"]["finalizers"] == ["ome.io/inferencereplica-cleanup"]
    # The finalizer is the InferenceReplica controller's to remove: an update leaves it be.
    stored = copy.deepcopy(wanted)
    stored["metadata"]["finalizers"] = []
    stored["metadata"]["resourceVersion"] = "7"
    assert not needs_update(stored, wanted)
    changed = project(isvc(engine={"minReplicas": 2}), RUNTIME, default_mode=None).replicas[
        "engine"
    ]
    assert "finalizers" not in update_patch(stored, changed)["metadata"]


def _irep(ready: int, wanted: int, *, observed: int | None, generation: int = 2) -> dict[str, Any]:
    status: dict[str, Any] = {"readyReplicas": ready, "replicas": wanted}
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "metadata": {"name": "chat-engine", "generation": generation},
        "spec": {
            "component": "engine",
            "replicas": wanted,
            "runners": [{"name": "default", "template": {}}],
        },
        "status": status,
    }


def test_ready_only_when_current_generation_reports_all_instances() -> None:
    assert not replica_readiness("engine", None).ready
    assert not replica_readiness("engine", _irep(0, 0, observed=None)).ready
    assert not replica_readiness("engine", _irep(4, 4, observed=1)).ready  # stale status
    assert not replica_readiness("engine", _irep(3, 4, observed=2)).ready
    assert replica_readiness("engine", _irep(4, 4, observed=2)).ready


def test_status_conditions_and_transition_times() -> None:
    service = isvc()
    engine = replica_readiness("engine", _irep(4, 4, observed=2))
    decoder = replica_readiness("decoder", _irep(1, 2, observed=2))
    status = build_status(isvc=service, components=[engine, decoder], now=NOW)
    kinds = {c["type"]: c for c in status["conditions"]}
    assert kinds["EngineReady"]["status"] == "True"
    assert kinds["DecoderReady"]["status"] == "False"
    assert kinds["Ready"]["status"] == "False"
    assert status["observedGeneration"] == 3
    assert status["components"]["engine"]["readyReplicas"] == 4
    service["status"] = status
    later = build_status(
        isvc=service, components=[engine, decoder], now=NOW + dt.timedelta(minutes=5)
    )
    assert later == status  # nothing changed, nothing to write


def test_a_runtime_created_again_with_the_same_spec_projects_the_same_revision() -> None:
    """Only the runtime's spec reaches the projection: its uid, resourceVersion,
    creationTimestamp and generation (all new on an object created again) change nothing:
    not the replicas, not the spec hash, not the revision the Instances run."""
    service = isvc(engine={"minReplicas": 2}, decoder={"minReplicas": 1})
    again = copy.deepcopy(RUNTIME)
    again["metadata"] = {
        **RUNTIME.get("metadata", {}),
        "uid": "a-new-uid",
        "resourceVersion": "98765",
        "creationTimestamp": "2027-01-01T00:00:00Z",
        "generation": 1,
        "managedFields": [{"manager": "kubectl", "operation": "Update"}],
    }
    first = project(service, RUNTIME, default_mode=None).replicas
    second = project(service, again, default_mode=None).replicas
    assert first == second

    def revision(replica: dict[str, Any]) -> str:
        shapes = tuple(
            RunnerShape(name=r["name"], size=r["size"], template=r["template"])
            for r in replica["spec"]["runners"]
        )
        return revision_of(isvc="chat", component=replica["spec"]["component"], runners=shapes)

    assert [revision(r) for r in first.values()] == [revision(r) for r in second.values()]


def test_a_runtime_that_is_gone_is_unresolved_even_when_the_component_has_an_image() -> None:
    """Projecting without it would drop its part of every template (a new revision, every
    Instance rolled) until it came back (rolled again)."""
    service = isvc(
        deploymentMode="OMENative", engine={"minReplicas": 1, "runner": {"image": "ome/own:1.0"}}
    )
    assert project(service, RUNTIME, default_mode=None).replicas
    with pytest.raises(ProjectionError) as caught:
        project(service, None, default_mode=None)
    assert caught.value.reason == "RuntimeUnresolved"
    assert str(caught.value) == (
        "runtime srt not found; the InferenceReplicas are left as they are until it exists"
    )


def test_the_spec_digest_is_of_the_wire_form() -> None:
    """A model holds ``multiplier: 2`` as ``2.0``; the API server stores ``2``. The digest is
    of what is stored, so it doesn't change when the models read the spec."""
    lifecycle = {"updateRetry": {"multiplier": 2, "maxAttempts": 3}}
    wanted = project(isvc(engine={"lifecycle": lifecycle}), RUNTIME, default_mode=None)
    replica = wanted.replicas["engine"]
    assert replica["spec"]["lifecycle"] == lifecycle
    assert isinstance(replica["spec"]["lifecycle"]["updateRetry"]["multiplier"], int)
    digest = replica["metadata"]["annotations"][ANNOTATION_SPEC_HASH]
    assert digest == owned.spec_hash(replica["spec"])
