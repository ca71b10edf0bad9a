"""``kubectl ome instance plan``'s lines, from objects as the API server returns them.

The pass is the controller's own (``plan_pass`` runs ``decide``); these tests pin the words
the plan prints for it: creates with their scale-up batch, drains and deletes with their
scale-down batch, and what the Instances wait for.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
from typing import Any

import pytest

from omed.cli.instance_plan import Inputs, PlanError, plan_pass, render, report, steps_of
from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.actions import CreatePods, WriteStatus
from omed.controllers.inferencereplica.core.status import status_body

NOW = dt.datetime(2026, 9, 14, 20, 0, 0, tzinfo=dt.UTC)
TEMPLATE = {"spec": {"containers": [{"name": "ome-container", "image": "ome/serving:1.0"}]}}
OMENATIVE = json.dumps({"instanceStatusEncoding": "DenseV1"})


def irep(replicas: int, *, paused: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {
            "name": "chat-engine",
            "namespace": "prod",
            "uid": "irep-uid",
            "generation": 1,
            "resourceVersion": "5",
            "finalizers": [names.FINALIZER],
            "labels": {"ome.io/inferenceservice": "chat"},
        },
        "spec": {
            "parentRef": {"name": "chat", "uid": "isvc-uid"},
            "component": "engine",
            "replicas": replicas,
            "paused": paused,
            "runners": [{"name": "default", "template": TEMPLATE}],
        },
    }


def config(**lifecycle: Any) -> dict[str, str]:
    data = {"omenativeStatus": OMENATIVE}
    if lifecycle:
        data["lifecycle"] = json.dumps(lifecycle)
    return data


def inputs(replica: dict[str, Any], pods: list[dict[str, Any]], **lifecycle: Any) -> Inputs:
    return Inputs(
        irep=replica,
        pods=pods,
        revisions=[],
        slices=[],
        pod_groups=None,
        nodes={},
        config=config(**lifecycle),
        pod_groups_crd=False,
    )


def running(body: dict[str, Any], *, node: str = "n-0") -> dict[str, Any]:
    """A pod the controller created (its POST body), bound, Ready and serving."""
    pod = copy.deepcopy(body)
    pod["metadata"]["uid"] = f"uid-{pod['metadata']['name']}"
    pod["metadata"]["resourceVersion"] = "7"
    pod["spec"]["nodeName"] = node
    since = "2026-09-14T19:00:00Z"
    pod["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": since}
            for t in ("PodScheduled", "ContainersReady", "Ready", "ome.io/serving")
        ],
    }
    return pod


def lines(given: Inputs) -> list[str]:
    return [step.text for step in steps_of(plan_pass(given, now=NOW))]


def test_a_scale_up_in_batches_names_each_pod_its_instance_and_batch() -> None:
    got = lines(inputs(irep(3), [], scaleUpPodBatchSize=1))
    creates = [line for line in got if line.startswith("create pod")]
    assert creates == ["create pod chat-engine-0-default-0 for Instance 0 (scale-up, batch 1 of 3)"]
    assert "waiting: Instance(s) 1-2 for a later scale-up batch (1 pods a batch)" in got
    assert got[0] == "write status (3 rows, progress ScalingUp)"


def test_an_unbounded_scale_up_is_one_batch() -> None:
    got = lines(inputs(irep(2), []))
    assert [line for line in got if line.startswith("create pod")] == [
        "create pod chat-engine-0-default-0 for Instance 0 (scale-up, batch 1 of 1)",
        "create pod chat-engine-1-default-0 for Instance 1 (scale-up, batch 1 of 1)",
    ]
    assert not any("later scale-up batch" in line for line in got)


def pods_of(replicas: int) -> list[dict[str, Any]]:
    """The pods the controller would create for ``replicas`` Instances, running."""
    decided = plan_pass(inputs(irep(replicas), []), now=NOW).decision.plan
    return [running(dict(p.body)) for c in decided.of_type(CreatePods) for p in c.pods]


def test_a_scale_down_drains_the_instances_past_replicas_first() -> None:
    pods = pods_of(3)
    got = lines(inputs(irep(1), pods, scaleDownPodBatchSize=1))
    gates = [line for line in got if line.startswith("set serving gate")]
    assert gates == [
        "set serving gate of pod chat-engine-2-default-0 of Instance 2 to False "
        f"({names.GATE_DRAINING}; scale-down, batch 1 of 2)"
    ]
    assert "waiting: Instance(s) 1 for a later scale-down batch (1 pods a batch)" in got
    assert not any(line.startswith("delete pod") for line in got)


def test_a_drained_instance_is_deleted() -> None:
    pods = pods_of(2)
    drained = pods[1]
    for cond in drained["status"]["conditions"]:
        if cond["type"] in ("Ready", "ome.io/serving"):
            cond["status"] = "False"
    got = lines(inputs(irep(1), pods))
    assert "delete pod chat-engine-1-default-0 of Instance 1 (scale-down, batch 1 of 1)" in got


def test_a_paused_replica_writes_no_pod_and_says_so() -> None:
    got = lines(inputs(irep(2, paused=True), []))
    assert not any(line.startswith(("create pod", "delete pod")) for line in got)
    assert "waiting: the InferenceReplica is paused: no pod is written" in got


def test_a_converged_replica_has_nothing_to_do_and_the_json_lists_the_same_steps() -> None:
    pods = pods_of(1)
    first = plan_pass(inputs(irep(1), pods), now=NOW)
    # Store the status the first pass writes: the next pass over it is quiet.
    stored = irep(1)
    (write,) = first.decision.plan.of_type(WriteStatus)
    stored["status"] = status_body(write.status, write.rows)
    planned = plan_pass(inputs(stored, pods), now=NOW)
    steps = steps_of(planned)
    out = render(steps, notes=[], header="InferenceReplica prod/chat-engine")
    # Only the ControllerRevision these inputs lack is left to write.
    (only,) = [s.text for s in steps]
    assert only.startswith("create ControllerRevision chat-engine-")
    assert out.splitlines() == ["InferenceReplica prod/chat-engine", only]
    doc = report(
        isvc="chat", component="engine", target=planned.target, steps=steps, now=NOW, notes=[]
    )
    assert doc["kind"] == "InstancePlanReport"
    assert [a["text"] for a in doc["actions"]] == [s.text for s in steps if s.kind == "do"]
    assert [w["text"] for w in doc["waiting"]] == [s.text for s in steps if s.kind == "waiting"]
    assert doc["inferenceReplica"]["name"] == "chat-engine"


def test_a_replica_the_controller_cant_read_is_an_error_not_a_plan() -> None:
    broken = irep(1)
    broken["status"] = {"instanceStatusEncoding": "ColumnarV9"}
    with pytest.raises(PlanError, match="leaves it alone until it changes"):
        plan_pass(inputs(broken, []), now=NOW)


def test_a_configmap_the_manager_would_refuse_is_an_error() -> None:
    given = dataclasses.replace(inputs(irep(1), []), config={})
    with pytest.raises(PlanError, match="omenativeStatus"):
        plan_pass(given, now=NOW)


def test_json_steps_name_their_instance_and_pod() -> None:
    steps = steps_of(plan_pass(inputs(irep(1), []), now=NOW))
    (create,) = [s for s in steps if s.action == "CreatePod"]
    assert (create.instance, create.pod) == (0, "chat-engine-0-default-0")
