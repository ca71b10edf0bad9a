"""Which transitions the simulated kubelet records as Warning events (sim.events)."""

from __future__ import annotations

from typing import Any

from omed_devcluster.sim.events import occurrences

IMAGES = {"main": "ome/serving:missing", "init": "ome/tools:1"}


def pod(*states: tuple[str, str | None, int], init: bool = False) -> dict[str, Any]:
    key = "initContainerStatuses" if init else "containerStatuses"
    return {
        "metadata": {"name": "chat-engine-0-default-0", "namespace": "prod", "uid": "u-1"},
        "status": {
            key: [
                {
                    "name": name,
                    "restartCount": restarts,
                    "state": {"waiting": {"reason": reason}} if reason else {"running": {}},
                }
                for name, reason, restarts in states
            ]
        },
    }


def found(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (o.container, o.reason, o.message)
        for o in occurrences(before, after["status"], images=IMAGES)
    ]


def test_a_pull_failure_and_its_back_off() -> None:
    first = pod(("main", "ContainerCreating", 0))
    pulling = pod(("main", "ErrImagePull", 0))
    backing = pod(("main", "ImagePullBackOff", 0))
    assert found(first, pulling) == [
        (
            "main",
            "Failed",
            'Failed to pull image "ome/serving:missing": rpc error: code = NotFound desc = '
            'failed to pull and unpack image "ome/serving:missing": not found (simulated)',
        )
    ]
    assert found(pulling, backing) == [("main", "Failed", "Error: ImagePullBackOff")]
    assert found(backing, backing) == []  # the same status written again: nothing new
    assert found(backing, pulling)[0][1] == "Failed"  # the next pull attempt fails again


def test_each_new_crash_loop_back_off_is_one_occurrence() -> None:
    running = pod(("main", None, 1))
    waiting = pod(("main", "CrashLoopBackOff", 1))
    assert found(running, waiting) == [
        (
            "main",
            "BackOff",
            "Back-off restarting failed container main in pod chat-engine-0-default-0_prod(u-1)",
        )
    ]
    assert found(waiting, waiting) == []
    assert len(found(waiting, pod(("main", "CrashLoopBackOff", 2)))) == 1


def test_init_containers_count_and_other_reasons_do_not() -> None:
    assert found(pod(init=True), pod(("init", "CrashLoopBackOff", 1), init=True))[0][0] == "init"
    assert found(pod(), pod(("main", "ContainerCreating", 0))) == []
    assert found({"metadata": {}}, pod(("main", None, 0))) == []
