"""The simulated kubelet restarts a container whose image is patched in place (what the
InPlaceIfPossible and InPlaceOnly update strategies do), on explicit times."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from omed_devcluster.sim.failures import ContainerPlan, Failure
from omed_devcluster.sim.kubelet import RUNNING, TERMINATED, WAITING, PodRuntime, Timings, image_id
from omed_devcluster.sim.podstatus import desired_status, phase

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
    image_pull_delay=1.5,
)
OLD, NEW, BAD = "ome/serving:1.0", "ome/serving:2.0", "ome/serving:bad-image"


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def make_pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"nodeName": "n0", "containers": [{"name": "main", "image": OLD}], **spec},
        "status": {"phase": "Pending"},
    }


def running_pod(
    pod: dict[str, Any] | None = None, *, timings: Timings = TIMINGS
) -> tuple[dict[str, Any], PodRuntime]:
    """A pod whose containers run and are ready since t=3."""
    pod = pod or make_pod()
    rt = PodRuntime.for_pod(pod, host_ip="172.18.0.2", pod_ip="10.244.0.2", now=T0, timings=timings)
    rt.advance(at(3))
    assert all(c.ready for c in rt.containers)
    return pod, rt


def status_at(rt: PodRuntime, pod: dict[str, Any], seconds: float) -> dict[str, Any]:
    rt.advance(at(seconds))
    return desired_status(rt, pod, now=at(seconds))


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def main_status(status: dict[str, Any]) -> dict[str, Any]:
    (found,) = [s for s in status["containerStatuses"] if s["name"] == "main"]
    return found


def test_a_patched_image_stops_the_container_then_starts_the_new_one() -> None:
    pod, rt = running_pod()
    old_id = rt.containers[0].container_id
    assert rt.set_images({"main": NEW}, at(10), grace=30) == ["main"]
    assert rt.next_due() == at(10.5)  # SIGTERM, exits after termination_delay

    # Until the old container exits it still runs the old image and serves.
    before = main_status(status_at(rt, pod, 10.4))
    assert (before["image"], before["ready"], before["restartCount"]) == (OLD, True, 0)

    stopped = status_at(rt, pod, 10.5)
    main = main_status(stopped)
    assert main["state"]["terminated"] == {
        "exitCode": 0,
        "reason": "Completed",
        "message": None,
        "startedAt": "2026-01-01T00:00:01Z",
        "finishedAt": "2026-01-01T00:00:10Z",
        "containerID": old_id,
    }
    assert (main["image"], main["imageID"], main["ready"], main["started"]) == (
        OLD,
        image_id(OLD),
        False,
        False,
    )
    assert stopped["phase"] == "Running"
    assert conditions(stopped)["Ready"] == ("False", "ContainersNotReady")
    assert conditions(stopped)["ContainersReady"] == ("False", "ContainersNotReady")
    assert rt.next_due() == at(12.0)  # the new image is pulled

    started = status_at(rt, pod, 12.0)
    main = main_status(started)
    assert main["image"] == NEW and main["imageID"] == image_id(NEW)
    assert main["restartCount"] == 1
    assert main["state"]["running"] == {"startedAt": "2026-01-01T00:00:12Z"}
    assert main["lastState"]["terminated"]["containerID"] == old_id
    assert main["lastState"]["terminated"]["reason"] == "Completed"
    assert main["containerID"] not in (None, old_id)
    assert (main["ready"], main["started"]) == (False, True)
    assert conditions(started)["Ready"][0] == "False"

    ready = status_at(rt, pod, 14.0)
    assert main_status(ready)["ready"] is True
    assert conditions(ready)["Ready"] == ("True", None)
    assert conditions(ready)["ContainersReady"] == ("True", None)
    assert rt.next_due() is None


def test_the_stop_is_capped_by_the_grace_period_and_the_annotation_delay() -> None:
    _pod, rt = running_pod()
    rt.set_images({"main": NEW}, at(10), grace=0.2)
    assert rt.next_due() == at(10.2)
    _pod, rt = running_pod()
    rt.set_images({"main": NEW}, at(10), grace=30, delay=4.0)
    assert rt.next_due() == at(14.0)


def test_an_unchanged_image_does_nothing() -> None:
    _pod, rt = running_pod()
    assert rt.set_images({"main": OLD}, at(10), grace=30) == []
    assert rt.next_due() is None
    rt.set_images({"main": NEW}, at(10), grace=30)
    assert rt.set_images({"main": NEW}, at(10.2), grace=30) == []  # the same change again
    assert rt.next_due() == at(10.5)


def test_only_the_patched_container_restarts() -> None:
    pod = make_pod(containers=[{"name": "main", "image": OLD}, {"name": "proxy", "image": "p:1"}])
    pod, rt = running_pod(pod)
    rt.set_images({"main": NEW, "proxy": "p:1"}, at(10), grace=30)
    status = status_at(rt, pod, 20)
    by_name = {s["name"]: s for s in status["containerStatuses"]}
    assert by_name["main"]["restartCount"] == 1 and by_name["main"]["image"] == NEW
    assert by_name["proxy"]["restartCount"] == 0 and by_name["proxy"]["image"] == "p:1"
    assert by_name["proxy"]["state"]["running"]["startedAt"] == "2026-01-01T00:00:01Z"


def test_an_image_that_cannot_be_pulled_goes_err_image_pull_then_recovers() -> None:
    pod, rt = running_pod()
    rt.set_images({"main": BAD}, at(10), grace=30)
    rt.set_plans({"main": ContainerPlan(failure=Failure.IMAGE_PULL)}, at(10))
    # The plan of the new image does not touch the old container while it stops.
    assert main_status(status_at(rt, pod, 10.4))["ready"] is True

    failed = status_at(rt, pod, 12.0)
    main = main_status(failed)
    assert main["state"]["waiting"]["reason"] == "ErrImagePull"
    assert BAD in main["state"]["waiting"]["message"]
    assert main["image"] == BAD and main["imageID"] == image_id(OLD)  # nothing new ran
    assert main["restartCount"] == 0
    assert main["lastState"]["terminated"]["reason"] == "Completed"
    assert failed["phase"] == "Running"
    assert conditions(failed)["Ready"] == ("False", "ContainersNotReady")

    backoff = main_status(status_at(rt, pod, 13.0))
    assert backoff["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert rt.next_due() == at(23.0)  # backoff_base, counted afresh for this spec
    assert main_status(status_at(rt, pod, 23.0))["state"]["waiting"]["reason"] == "ErrImagePull"

    # A corrected image, patched in place while backing off: pulled at once, no back-off.
    assert rt.set_images({"main": NEW}, at(23.5), grace=30) == ["main"]
    rt.set_plans({"main": ContainerPlan()}, at(23.5))
    assert rt.next_due() == at(25.0)
    main = main_status(status_at(rt, pod, 25.0))
    assert main["state"]["running"] and main["image"] == NEW and main["imageID"] == image_id(NEW)
    assert main["restartCount"] == 1
    assert main_status(status_at(rt, pod, 27.0))["ready"] is True


def test_a_crash_looping_new_image_crash_loops() -> None:
    _pod, rt = running_pod()
    rt.set_images({"main": NEW}, at(10), grace=30)
    rt.set_plans({"main": ContainerPlan(failure=Failure.CRASH_LOOP, crash_after=1.0)}, at(10))
    rt.advance(at(12.0))  # started on the new image
    c = rt.containers[0]
    assert (c.state, c.image, c.restart_count) == (RUNNING, NEW, 1)
    rt.advance(at(13.0))  # crashes, restarts at once
    assert (c.state, c.restart_count) == (RUNNING, 2)
    rt.advance(at(14.0))  # crashes again: back-off
    assert (c.state, c.reason) == (WAITING, "CrashLoopBackOff")
    assert c.last_terminated is not None and c.last_terminated["reason"] == "Error"


def test_a_crash_looping_container_patched_to_a_good_image_starts_without_back_off() -> None:
    _pod, rt = running_pod()
    rt.set_plans({"main": ContainerPlan(failure=Failure.CRASH_LOOP, crash_after=1.0)}, at(3))
    rt.advance(at(5.0))  # crashed twice: CrashLoopBackOff until 15
    c = rt.containers[0]
    assert c.reason == "CrashLoopBackOff" and rt.next_due() == at(15.0)
    rt.set_images({"main": NEW}, at(6.0), grace=30)
    rt.set_plans({"main": ContainerPlan()}, at(6.0))
    assert rt.next_due() == at(7.5)
    rt.advance(at(9.5))
    assert (c.state, c.image, c.ready, c.restart_count) == (RUNNING, NEW, True, 2)


def test_a_running_container_is_not_crashed_while_it_stops() -> None:
    _pod, rt = running_pod()
    rt.set_plans({"main": ContainerPlan(failure=Failure.CRASH_LOOP, crash_after=5.0)}, at(3))
    rt.set_images({"main": NEW}, at(7.8), grace=30)  # the crash was due at 8
    rt.set_plans({"main": ContainerPlan()}, at(7.8))
    rt.advance(at(8.3))
    c = rt.containers[0]
    assert c.state == TERMINATED and c.exit_code == 0 and c.restart_count == 0


def test_patched_back_before_the_old_container_stopped_keeps_it() -> None:
    pod, rt = running_pod()
    rt.set_images({"main": NEW}, at(10), grace=30)
    assert rt.set_images({"main": OLD}, at(10.2), grace=30) == []
    assert rt.next_due() is None
    main = main_status(status_at(rt, pod, 20))
    assert (main["image"], main["restartCount"], main["ready"]) == (OLD, 0, True)


def test_a_second_patch_while_pulling_runs_the_latest_image() -> None:
    pod, rt = running_pod()
    rt.set_images({"main": NEW}, at(10), grace=30)
    rt.advance(at(10.5))  # stopped; pulling
    rt.set_images({"main": "ome/serving:3.0"}, at(11), grace=30)
    main = main_status(status_at(rt, pod, 20))
    assert (main["image"], main["restartCount"], main["ready"]) == ("ome/serving:3.0", 1, True)


def test_restart_policy_never_still_restarts_a_changed_container() -> None:
    pod, rt = running_pod(make_pod(restartPolicy="Never"))
    rt.set_images({"main": NEW}, at(10), grace=30)
    status = status_at(rt, pod, 20)
    assert status["phase"] == "Running"
    assert main_status(status)["restartCount"] == 1 and main_status(status)["image"] == NEW


def test_a_pod_not_started_yet_just_pulls_the_new_image() -> None:
    pod = make_pod()
    rt = PodRuntime.for_pod(pod, host_ip="172.18.0.2", pod_ip="10.244.0.2", now=T0, timings=TIMINGS)
    rt.advance(at(0.5))  # reported, ContainerCreating
    assert rt.set_images({"main": NEW}, at(0.5), grace=30) == ["main"]
    main = main_status(status_at(rt, pod, 3.0))
    assert (main["image"], main["imageID"], main["restartCount"], main["ready"]) == (
        NEW,
        image_id(NEW),
        0,
        True,
    )
    assert main["lastState"]["terminated"] is None


def test_a_first_pull_failure_is_retried_at_once_on_a_new_image() -> None:
    pod = make_pod(containers=[{"name": "main", "image": BAD}])
    rt = PodRuntime.for_pod(
        pod,
        host_ip="172.18.0.2",
        pod_ip="10.244.0.2",
        now=T0,
        timings=TIMINGS,
        plans={"main": ContainerPlan(failure=Failure.IMAGE_PULL)},
    )
    rt.advance(at(2.5))  # ErrImagePull at 1, ImagePullBackOff at 2 until 12
    assert rt.containers[0].reason == "ImagePullBackOff"
    rt.set_images({"main": NEW}, at(3.0), grace=30)
    rt.set_plans({"main": ContainerPlan()}, at(3.0))
    assert rt.next_due() == at(4.5)
    main = main_status(status_at(rt, pod, 6.5))
    assert (main["image"], main["restartCount"], main["ready"]) == (NEW, 0, True)
    assert phase(rt) == "Running"


def test_a_completed_init_container_is_not_run_again() -> None:
    pod = make_pod(initContainers=[{"name": "fetch", "image": "fetch:1"}])
    pod, rt = running_pod(pod)
    assert rt.set_images({"fetch": "fetch:2", "main": OLD}, at(10), grace=30) == []
    assert rt.next_due() is None


def test_a_sidecar_restarts_on_a_new_image() -> None:
    sidecar = {"name": "proxy", "image": "p:1", "restartPolicy": "Always"}
    pod, rt = running_pod(make_pod(initContainers=[sidecar]))
    assert rt.set_images({"proxy": "p:2", "main": OLD}, at(10), grace=30) == ["proxy"]
    status = status_at(rt, pod, 20)
    (proxy,) = status["initContainerStatuses"]
    assert (proxy["image"], proxy["restartCount"], proxy["ready"]) == ("p:2", 1, True)
    assert main_status(status)["restartCount"] == 0


def test_a_terminating_pod_ignores_image_changes() -> None:
    _pod, rt = running_pod()
    rt.begin_termination(at(10), grace=30, delay=None)
    assert rt.set_images({"main": NEW}, at(10.1), grace=30) == []


def test_a_frozen_node_delays_the_restart() -> None:
    _pod, rt = running_pod()
    rt.set_images({"main": NEW}, at(10), grace=30)
    rt.freeze(at(10.2))
    rt.thaw(at(20.2))
    assert rt.next_due() == at(20.5)


def test_a_restart_injected_while_stopping_starts_the_new_image() -> None:
    _pod, rt = running_pod()
    rt.set_images({"main": NEW}, at(10), grace=30)
    assert rt.kill("main", at(10.1)) == 1
    c = rt.containers[0]
    assert (c.state, c.image) == (RUNNING, NEW)
    rt.advance(at(20))
    assert c.restart_count == 1  # no second stop


def test_an_adopted_pod_whose_spec_moved_on_is_restarted() -> None:
    """Another simulator process ran the old image; the spec now names a new one."""
    pod, old_rt = running_pod()
    pod["status"] = desired_status(old_rt, pod, now=at(3))
    pod["spec"]["containers"][0]["image"] = NEW
    rt = PodRuntime.for_pod(
        pod, host_ip="172.18.0.2", pod_ip="10.244.0.2", now=at(5), timings=TIMINGS
    )
    rt.adopt(pod["status"], at(5))
    assert rt.containers[0].image == OLD
    assert rt.set_images({"main": NEW}, at(5), grace=30) == ["main"]
    main = main_status(status_at(rt, pod, 20))
    assert (main["image"], main["restartCount"], main["ready"]) == (NEW, 1, True)


def test_realistic_timings_pull_like_a_first_start() -> None:
    realistic = Timings.realistic()
    assert realistic.image_pull_delay == realistic.running_delay - realistic.start_delay
    default = Timings()
    assert default.image_pull_delay == default.running_delay - default.start_delay
    assert dataclasses.replace(default, image_pull_delay=1.0).image_pull_delay == 1.0
