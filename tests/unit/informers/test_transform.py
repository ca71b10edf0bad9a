"""The pod projection keeps exactly what controllers read, and sharing never mixes values."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from omed.informers.transform import (
    LAST_APPLIED,
    Obj,
    SharedValues,
    identity,
    make_pod_transform,
    strip_managed_fields,
)

FIXTURE = Path("/work/shared/fixtures/ome-serving-pod.json")


def serving_pod() -> Obj:
    loaded: Obj = json.loads(FIXTURE.read_text())
    return loaded


def reference(obj: Obj, prefixes: tuple[str, ...] = ("ome.io/",)) -> Obj:
    """The projection written plainly from POD_FIELDS, to compare the fast one against."""

    def pick(src: Any, keys: tuple[str, ...]) -> Obj:
        return {k: src[k] for k in keys if isinstance(src, dict) and src.get(k) is not None}

    md = obj.get("metadata") or {}
    out_md = pick(
        md,
        (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ),
    )
    out_md.setdefault("namespace", md.get("namespace") or "")
    if md.get("labels"):
        out_md["labels"] = dict(md["labels"])
    kept_ann = {k: v for k, v in (md.get("annotations") or {}).items() if k.startswith(prefixes)}
    if kept_ann:
        out_md["annotations"] = kept_ann
    if md.get("ownerReferences"):
        owner_keys = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
        out_md["ownerReferences"] = [
            {k: v for k, v in ref.items() if k in owner_keys} for ref in md["ownerReferences"]
        ]
    if md.get("finalizers"):
        out_md["finalizers"] = list(md["finalizers"])
    out: Obj = {
        "apiVersion": obj.get("apiVersion") or "v1",
        "kind": obj.get("kind") or "Pod",
        "metadata": out_md,
    }
    spec = obj.get("spec")
    if spec:
        out_spec = pick(spec, ("nodeName", "hostname", "subdomain"))
        if spec.get("readinessGates"):
            out_spec["readinessGates"] = [
                {"conditionType": g.get("conditionType")} for g in spec["readinessGates"]
            ]
        if spec.get("containers"):
            out_spec["containers"] = [pick(c, ("name", "image")) for c in spec["containers"]]
        out["spec"] = out_spec
    status = obj.get("status")
    if status:
        out_status = pick(
            status,
            ("phase", "reason", "message", "podIP", "hostIP", "startTime", "observedGeneration"),
        )
        if status.get("conditions"):
            out_status["conditions"] = [
                {k: v for k, v in c.items() if v is not None and k != "lastProbeTime"}
                for c in status["conditions"]
            ]
        for field in ("containerStatuses", "initContainerStatuses"):
            if status.get(field):
                out_status[field] = [
                    pick(
                        s,
                        ("name", "ready", "started", "restartCount", "image", "state", "lastState"),
                    )
                    for s in status[field]
                ]
        out["status"] = out_status
    return out


def test_serving_pod_keeps_what_controllers_read() -> None:
    source = serving_pod()
    kept = make_pod_transform()(copy.deepcopy(source))
    assert kept == reference(source)
    md = kept["metadata"]
    assert "managedFields" not in md
    assert md["annotations"] == {"ome.io/deploymentMode": "OMENative"}
    assert md["labels"] == source["metadata"]["labels"]
    assert md["ownerReferences"] == source["metadata"]["ownerReferences"]
    assert kept["spec"] == {
        "nodeName": "gpu-node-7",
        "readinessGates": [{"conditionType": "ome.io/serving"}],
        "containers": [
            {"name": "ome-container", "image": source["spec"]["containers"][0]["image"]}
        ],
    }
    status = kept["status"]
    assert [c["type"] for c in status["conditions"]] == [
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
        "ome.io/serving",
    ]
    assert all("lastProbeTime" not in c for c in status["conditions"])
    assert set(status["containerStatuses"][0]) == {
        "name",
        "ready",
        "started",
        "restartCount",
        "image",
        "state",
        "lastState",
    }
    assert status["podIP"] == "10.1.0.7" and status["hostIP"] == "10.0.0.1"
    # Far smaller than what came in.
    assert len(json.dumps(kept)) < len(json.dumps(source)) / 2


def test_annotation_prefixes_and_extra_fields_are_configurable() -> None:
    source = serving_pod()
    source["metadata"]["annotations"]["sim.omed.dev/fail"] = "crash"

    def with_priority(src: Obj, kept: Obj) -> None:
        kept["spec"]["priority"] = src["spec"].get("priority", 0)

    transform = make_pod_transform(
        annotation_prefixes=("ome.io/", "sim.omed.dev/"), extra=with_priority
    )
    kept = transform(source)
    assert kept["metadata"]["annotations"] == {
        "ome.io/deploymentMode": "OMENative",
        "sim.omed.dev/fail": "crash",
    }
    assert kept["spec"]["priority"] == 0


def test_equal_parts_of_different_pods_are_one_object() -> None:
    transform = make_pod_transform()
    a, b = serving_pod(), serving_pod()
    b["metadata"]["name"] = "other"
    b["metadata"]["uid"] = "uid-other"
    b["metadata"]["labels"]["ome.io/instance-index"] = "8"
    ka, kb = transform(a), transform(b)
    assert ka["metadata"]["name"] != kb["metadata"]["name"]
    for path in (
        ("metadata", "ownerReferences"),
        ("metadata", "annotations"),
        ("spec", "containers"),
        ("spec", "readinessGates"),
        ("status", "conditions"),
    ):
        assert ka[path[0]][path[1]] is kb[path[0]][path[1]], path
    assert ka["status"]["containerStatuses"][0] is kb["status"]["containerStatuses"][0]
    # Repeated strings are one object too.
    assert ka["metadata"]["labels"]["component"] is kb["metadata"]["labels"]["component"]
    assert ka["spec"]["nodeName"] is sys.intern("gpu-node-7")


def test_a_different_condition_gets_its_own_object() -> None:
    transform = make_pod_transform()
    a, b = serving_pod(), serving_pod()
    b["status"]["conditions"][1]["status"] = "False"
    b["status"]["conditions"][1]["reason"] = "ContainersNotReady"
    ka, kb = transform(a), transform(b)
    assert ka["status"]["conditions"][1]["status"] == "True"
    assert kb["status"]["conditions"][1] == {
        "type": "Ready",
        "status": "False",
        "reason": "ContainersNotReady",
        "lastTransitionTime": "2026-09-28T10:13:04Z",
    }
    assert ka["status"]["conditions"][0] is kb["status"]["conditions"][0]


def test_shared_table_is_bounded() -> None:
    table = SharedValues(limit=8)
    transform = make_pod_transform(shared=table)
    for i in range(50):
        source = serving_pod()
        for cond in source["status"]["conditions"]:
            cond["lastTransitionTime"] = f"2026-09-28T10:13:{i:02d}Z"
        transform(source)
        assert len(table) <= 8


def test_sparse_pods_are_fine() -> None:
    transform = make_pod_transform()
    bare = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "1"}}
    assert transform(bare) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
    }
    odd = serving_pod()
    odd["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "X", "n": {"a": 1}}}
    kept = transform(odd)
    assert kept["status"]["containerStatuses"][0]["state"]["waiting"]["n"] == {"a": 1}


def test_the_kubelets_observed_generation_is_kept() -> None:
    """An in-place image patch bumps metadata.generation; status.observedGeneration says
    whether the kubelet has seen it (the InferenceReplica controller reads both)."""
    source = serving_pod()
    source["metadata"]["generation"] = 2
    source["status"]["observedGeneration"] = 1
    kept = make_pod_transform()(copy.deepcopy(source))
    assert kept["metadata"]["generation"] == 2
    assert kept["status"]["observedGeneration"] == 1
    assert kept == reference(source)


def test_strip_managed_fields_works_in_place() -> None:
    source = serving_pod()
    source["metadata"]["annotations"][LAST_APPLIED] = "{}"
    same = strip_managed_fields(source)
    assert same is source
    assert "managedFields" not in same["metadata"]
    assert LAST_APPLIED not in same["metadata"]["annotations"]
    assert same["spec"]["containers"][0]["env"]  # everything else stays
    assert strip_managed_fields({"kind": "X"}) == {"kind": "X"}
    assert identity(source) is source


# -- property: the fast projection equals the plain one, even with sharing -------------------

text = st.sampled_from(["a", "b", "True", "False", "2026-01-01T00:00:00Z", "ome.io/serving"])
maybe = st.one_of(st.none(), text)
condition = st.fixed_dictionaries(
    {"type": text, "status": text},
    optional={
        "reason": maybe,
        "message": maybe,
        "lastTransitionTime": text,
        "lastProbeTime": st.none(),
    },
)
state: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"running": st.fixed_dictionaries({"startedAt": text})}),
    st.fixed_dictionaries(
        {"terminated": st.fixed_dictionaries({"exitCode": st.integers(0, 3), "reason": text})}
    ),
)
container_status = st.fixed_dictionaries(
    {
        "name": text,
        "ready": st.booleans(),
        "restartCount": st.integers(0, 2),
        "state": state,
        "lastState": state,
    },
    optional={"started": st.booleans(), "image": text, "containerID": text},
)
pods = st.builds(
    lambda name, labels, ann, conds, statuses, node, owners: {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": labels,
            "annotations": ann,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "K", "name": o, "uid": o, "controller": True}
                for o in owners
            ],
            "managedFields": [{"manager": "x"}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i", "args": ["x"]}]},
        "status": {"phase": "Running", "conditions": conds, "containerStatuses": statuses},
    },
    st.text("abc", min_size=1, max_size=3),
    st.dictionaries(st.sampled_from(["ome.io/x", "component", "app"]), text),
    st.dictionaries(st.sampled_from(["ome.io/a", "other/b", "c"]), text),
    st.lists(condition, max_size=4),
    st.lists(container_status, max_size=2),
    text,
    st.lists(st.sampled_from(["o1", "o2"]), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(pods, min_size=1, max_size=8))
def test_projection_matches_the_plain_reading(sources: list[Obj]) -> None:
    transform = make_pod_transform(shared=SharedValues(limit=16))
    expected = [reference(copy.deepcopy(s)) for s in sources]
    kept = [transform(copy.deepcopy(s)) for s in sources]
    # Compared after all are transformed: sharing never changed an earlier result.
    for one_kept, one_expected in zip(kept, expected, strict=True):
        status = one_expected.get("status", {})
        if not status.get("conditions"):
            status.pop("conditions", None)
        if not status.get("containerStatuses"):
            status.pop("containerStatuses", None)
        md = one_expected["metadata"]
        if not md.get("ownerReferences"):
            md.pop("ownerReferences", None)
        assert json.loads(json.dumps(one_kept)) == json.loads(json.dumps(one_expected))
