"""The simulated kubelet's state machine and the status it produces, on explicit times."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from omed_devcluster.sim.failures import ContainerPlan, Failure
from omed_devcluster.sim.kubelet import PodRuntime, Timings, image_id
from omed_devcluster.sim.podstatus import (
    desired_status,
    phase,
    status_matches,
)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TIMINGS = Timings(
    start_delay=0.1,
    running_delay=1.0,
    ready_delay=2.0,
    termination_delay=0.5,
    crash_after=3.0,
    backoff_base=10.0,
    backoff_max=40.0,
    pull_error_duration=1.0,
)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def make_pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {
            "nodeName": "n0",
            "containers": [{"name": "main", "image": "ome/serving:1.0"}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def runtime(pod: dict[str, Any], plans: dict[str, ContainerPlan] | None = None) -> PodRuntime:
    return PodRuntime.for_pod(
        pod, host_ip="172.18.0.2", pod_ip="10.244.0.2", now=T0, timings=TIMINGS, plans=plans
    )


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def observe(pod: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """What the pod looks like after the API server applied the status patch."""
    merged = dict(pod.get("status") or {})
    prior = {c["type"]: c for c in merged.get("conditions") or []}
    for cond in status.get("conditions") or []:
        prior[cond["type"]] = {k: v for k, v in cond.items() if v is not None}
    merged.update({k: v for k, v in status.items() if k != "conditions"})
    merged["conditions"] = list(prior.values())
    return {**pod, "status": merged}


def test_plain_pod_goes_pending_running_ready() -> None:
    pod = make_pod()
    rt = runtime(pod)
    assert desired_status(rt, pod, now=T0) == {}
    assert rt.next_due() == at(0.1)

    rt.advance(at(0.1))
    status = desired_status(rt, pod, now=at(0.1))
    assert status["phase"] == "Pending"
    assert "podIP" not in status
    assert status["startTime"] == "2026-01-01T00:00:00Z"
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    assert conditions(status)["Initialized"] == ("True", None)
    assert conditions(status)["PodReadyToStartContainers"] == ("False", None)

    rt.advance(at(1.0))
    status = desired_status(rt, pod, now=at(1.0))
    assert status["phase"] == "Running"
    assert status["podIP"] == "10.244.0.2"
    assert status["hostIP"] == "172.18.0.2"
    container = status["containerStatuses"][0]
    assert container["state"]["running"] == {"startedAt": "2026-01-01T00:00:01Z"}
    assert container["started"] is True
    assert container["ready"] is False
    assert container["imageID"] == image_id("ome/serving:1.0")
    assert container["containerID"].startswith("containerd://")
    assert conditions(status)["Ready"] == ("False", "ContainersNotReady")

    rt.advance(at(3.0))
    status = desired_status(rt, pod, now=at(3.0))
    assert status["containerStatuses"][0]["ready"] is True
    assert conditions(status)["Ready"] == ("True", None)
    assert conditions(status)["ContainersReady"] == ("True", None)
    assert rt.next_due() is None


def test_late_advance_keeps_due_timestamps() -> None:
    pod = make_pod()
    rt = runtime(pod)
    rt.advance(at(100))
    status = desired_status(rt, pod, now=at(100))
    assert status["containerStatuses"][0]["state"]["running"]["startedAt"] == (
        "2026-01-01T00:00:01Z"
    )
    assert status["containerStatuses"][0]["ready"] is True


def test_readiness_gates() -> None:
    pod = make_pod(readinessGates=[{"conditionType": "ome.io/serving"}])
    rt = runtime(pod)
    rt.advance(at(5))
    status = desired_status(rt, pod, now=at(5))
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ReadinessGatesNotReady")
    assert ready["message"] == (
        'corresponding condition of pod readiness gate "ome.io/serving" does not exist.'
    )
    assert conditions(status)["ContainersReady"] == ("True", None)
    assert all(c["type"] != "ome.io/serving" for c in status["conditions"])

    pod = observe(pod, status)
    pod["status"]["conditions"].append({"type": "ome.io/serving", "status": "False"})
    status = desired_status(rt, pod, now=at(6))
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["message"] == (
        'the status of pod readiness gate "ome.io/serving" is not "True", but False'
    )

    pod["status"]["conditions"][-1]["status"] = "True"
    status = desired_status(rt, pod, now=at(7))
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert ready["lastTransitionTime"] == "2026-01-01T00:00:07Z"


def test_transition_time_moves_only_with_status() -> None:
    pod = make_pod()
    rt = runtime(pod)
    rt.advance(at(1))
    first = desired_status(rt, pod, now=at(1))
    pod = observe(pod, first)
    again = desired_status(rt, pod, now=at(2))
    assert again == first
    assert status_matches(again, pod)
    rt.advance(at(3))
    later = desired_status(rt, pod, now=at(3))
    times = {c["type"]: c["lastTransitionTime"] for c in later["conditions"]}
    assert times["Ready"] == "2026-01-01T00:00:03Z"
    assert times["Initialized"] == "2026-01-01T00:00:01Z"
    assert not status_matches(later, pod)


def test_image_pull_failure_alternates_with_growing_backoff() -> None:
    pod = make_pod()
    rt = runtime(pod, {"main": ContainerPlan(failure=Failure.IMAGE_PULL)})
    rt.advance(at(1.0))
    status = desired_status(rt, pod, now=at(1.0))
    container = status["containerStatuses"][0]
    assert container["state"]["waiting"]["reason"] == "ErrImagePull"
    assert 'Failed to pull image "ome/serving:1.0"' in container["state"]["waiting"]["message"]
    assert status["phase"] == "Pending"
    assert status["podIP"] == "10.244.0.2"
    rt.advance(at(2.0))
    waiting = desired_status(rt, pod, now=at(2.0))["containerStatuses"][0]
    assert waiting["state"]["waiting"] == {
        "reason": "ImagePullBackOff",
        "message": 'Back-off pulling image "ome/serving:1.0"',
    }
    assert waiting["restartCount"] == 0
    assert waiting["ready"] is False
    assert waiting["containerID"] is None
    assert waiting["imageID"] == ""
    assert rt.next_due() == at(12.0)  # first back-off: 10s
    rt.advance(at(13.0))
    assert rt.containers[0].reason == "ImagePullBackOff"
    assert rt.next_due() == at(33.0)  # second: 20s


def test_image_pull_recovers_once_the_failure_is_cleared() -> None:
    pod = make_pod()
    rt = runtime(pod, {"main": ContainerPlan(failure=Failure.IMAGE_PULL)})
    rt.advance(at(2.0))
    rt.set_plans({"main": ContainerPlan()}, at(2.5))
    rt.advance(at(12.0))
    assert rt.containers[0].state == "running"
    assert rt.containers[0].restart_count == 0


def test_crash_loop() -> None:
    pod = make_pod()
    rt = runtime(pod, {"main": ContainerPlan(failure=Failure.CRASH_LOOP, exit_code=3)})
    rt.advance(at(3.9))
    c = rt.containers[0]
    assert (c.state, c.ready, c.restart_count) == ("running", True, 0)
    # runs 1..4: exits, restarts at once (no back-off the first time)
    rt.advance(at(4.0))
    assert (c.state, c.restart_count) == ("running", 1)
    status = desired_status(rt, pod, now=at(4.0))["containerStatuses"][0]
    assert status["lastState"]["terminated"]["exitCode"] == 3
    assert status["lastState"]["terminated"]["reason"] == "Error"
    assert status["lastState"]["terminated"]["startedAt"] == "2026-01-01T00:00:01Z"
    assert status["lastState"]["terminated"]["finishedAt"] == "2026-01-01T00:00:04Z"
    # second run 4..7, then CrashLoopBackOff for 10s
    rt.advance(at(7.0))
    status = desired_status(rt, pod, now=at(7.0))
    container = status["containerStatuses"][0]
    assert container["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert container["state"]["waiting"]["message"] == (
        "back-off 10s restarting failed container=main pod=p_ns(u1)"
    )
    assert container["restartCount"] == 1
    assert status["phase"] == "Running"
    assert conditions(status)["Ready"] == ("False", "ContainersNotReady")
    rt.advance(at(17.0))
    assert (c.state, c.restart_count) == ("running", 2)
    rt.advance(at(20.0))
    assert c.reason == "CrashLoopBackOff"
    assert rt.next_due() == at(40.0)  # 20s
    rt.advance(at(200.0))
    assert c.restart_count >= 5
    assert rt.timings.backoff(10) == 40.0


def test_crash_with_restart_policy_never_fails_the_pod() -> None:
    pod = make_pod(restartPolicy="Never")
    rt = runtime(pod, {"main": ContainerPlan(failure=Failure.CRASH_LOOP)})
    rt.advance(at(100))
    assert phase(rt) == "Failed"
    assert rt.containers[0].restart_count == 0
    assert rt.next_due() is None


def test_never_ready_and_recovery() -> None:
    pod = make_pod()
    rt = runtime(pod, {"main": ContainerPlan(failure=Failure.NEVER_READY)})
    rt.advance(at(100))
    c = rt.containers[0]
    assert (c.state, c.ready) == ("running", False)
    assert phase(rt) == "Running"
    rt.set_plans({"main": ContainerPlan()}, at(100))
    rt.advance(at(102))
    assert c.ready is True
    rt.set_plans({"main": ContainerPlan(failure=Failure.NEVER_READY)}, at(103))
    assert c.ready is False


def test_crash_injected_into_a_running_container() -> None:
    pod = make_pod()
    rt = runtime(pod)
    rt.advance(at(10))
    rt.set_plans({"main": ContainerPlan(failure=Failure.CRASH_LOOP, crash_after=1.0)}, at(10))
    rt.advance(at(11))
    assert rt.containers[0].restart_count == 1


def test_kill_restarts_at_once() -> None:
    pod = make_pod()
    rt = runtime(pod)
    rt.advance(at(10))
    assert rt.kill("main", at(10)) == 1
    c = rt.containers[0]
    assert (c.state, c.ready) == ("running", False)
    assert c.last_terminated is not None
    assert c.last_terminated["exitCode"] == 137
    rt.advance(at(12))
    assert c.ready is True
    with pytest.raises(LookupError):
        rt.kill("nope", at(12))


def test_termination_is_capped_by_grace_and_ends_terminal() -> None:
    pod = make_pod()
    rt = runtime(pod)
    rt.advance(at(10))
    rt.begin_termination(at(10), grace=0.2, delay=None)
    assert rt.next_due() == at(10.2)
    rt.advance(at(10.2))
    assert rt.terminated
    status = desired_status(rt, pod, now=at(10.2))
    assert status["phase"] == "Succeeded"
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert conditions(status)["Ready"] == ("False", "PodCompleted")
    assert rt.next_due() is None


def test_termination_before_start() -> None:
    rt = runtime(make_pod())
    rt.begin_termination(T0, grace=30, delay=None)
    rt.advance(at(0.5))
    assert rt.terminated


def test_init_containers_run_first() -> None:
    pod = make_pod(
        initContainers=[
            {"name": "fetch", "image": "ome/fetch:1"},
            {"name": "proxy", "image": "ome/proxy:1", "restartPolicy": "Always"},
        ]
    )
    rt = runtime(pod)
    rt.advance(at(0.5))
    status = desired_status(rt, pod, now=at(0.5))
    assert conditions(status)["Initialized"] == ("False", "ContainersNotInitialized")
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"
    rt.advance(at(1.0))
    status = desired_status(rt, pod, now=at(1.0))
    init = {s["name"]: s for s in status["initContainerStatuses"]}
    assert init["fetch"]["state"]["terminated"]["reason"] == "Completed"
    assert init["proxy"]["state"]["running"] is not None
    assert conditions(status)["Initialized"] == ("True", None)
    rt.advance(at(3.0))
    status = desired_status(rt, pod, now=at(3.0))
    assert conditions(status)["Ready"] == ("True", None)


def test_init_container_image_pull_blocks_the_pod() -> None:
    pod = make_pod(initContainers=[{"name": "fetch", "image": "ome/fetch:missing"}])
    rt = runtime(pod, {"fetch": ContainerPlan(failure=Failure.IMAGE_PULL)})
    rt.advance(at(30))
    status = desired_status(rt, pod, now=at(30))
    assert status["phase"] == "Pending"
    assert status["initContainerStatuses"][0]["state"]["waiting"]["reason"] in (
        "ErrImagePull",
        "ImagePullBackOff",
    )
    assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"


def test_freeze_and_thaw_shift_pending_transitions() -> None:
    pod = make_pod()
    rt = runtime(pod)
    rt.advance(at(1.0))
    rt.freeze(at(1.5))
    assert rt.next_due() is None
    rt.advance(at(50))
    assert rt.containers[0].ready is False
    rt.thaw(at(11.5))
    assert rt.next_due() == at(13.0)


def test_adopt_keeps_running_containers() -> None:
    pod = make_pod()
    old = runtime(pod)
    old.advance(at(10))
    pod = observe(pod, desired_status(old, pod, now=at(10)))
    rt = runtime(pod)
    rt.adopt(pod["status"], at(20))
    assert rt.next_due() is None
    assert status_matches(desired_status(rt, pod, now=at(20)), pod)


def test_generation_is_observed() -> None:
    pod = make_pod()
    pod["metadata"]["generation"] = 3
    rt = runtime(pod)
    rt.advance(at(1))
    status = desired_status(rt, pod, now=at(1))
    assert status["observedGeneration"] == 3
    assert {c["observedGeneration"] for c in status["conditions"]} == {3}


def test_image_id_drops_the_tag_or_digest() -> None:
    assert image_id("ome/serving:1.0").startswith("ome/serving@sha256:")
    assert image_id("ome/serving@sha256:abc").startswith("ome/serving@sha256:")
    assert image_id("ome/serving").startswith("ome/serving@sha256:")
    assert image_id("ome/serving:1.0") != image_id("ome/serving:2.0")
