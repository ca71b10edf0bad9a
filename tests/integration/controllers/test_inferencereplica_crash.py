"""Killing the controller at exact requests, then resuming with a fresh one.

:class:`KillSwitch` stands between the controller and the API client and, at the request
chosen by the test, cancels the controller's task and never sends that request, the way a
``kill -9`` between two lines would. A fresh controller (new caches, new expectations) must
then finish with exactly the wanted pods: no pod twice, no delete lost, no pod deleted while
it was still routed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from test_inferencereplica import TEMPLATE, Cluster, Running, cluster, eventually, irep_body

from omed.controllers.inferencereplica.core.model import PlanSettings
from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_REPLICAS, PODS

pytestmark = pytest.mark.integration
__all__ = ["cluster"]  # the fixture, shared with test_inferencereplica

Matcher = Callable[[str, Any, tuple[Any, ...], dict[str, Any]], bool]


class KillSwitch:
    """A :class:`KubeClient` stand-in that kills its controller at the ``count``-th match."""

    def __init__(self, kube: KubeClient, matches: Matcher, count: int = 1) -> None:
        self._kube = kube
        self._matches = matches
        self._left = count
        self.running: Running | None = None
        self.fired = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._kube, name)

        async def call(resource: Any, *args: Any, **kwargs: Any) -> Any:
            if not self.fired.is_set() and self._matches(name, resource, args, kwargs):
                self._left -= 1
                if self._left == 0:
                    self.fired.set()
                    assert self.running is not None and self.running.task is not None
                    self.running.task.cancel()
                    await asyncio.sleep(3600)  # the request is never sent
            return await method(resource, *args, **kwargs)

        return call


def pod_create(name: str, resource: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    return name == "create" and resource is PODS


def pod_delete(name: str, resource: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    return name == "delete" and resource is PODS


def gate_write(name: str, resource: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    return name == "patch" and resource is PODS and kw.get("subresource") == "status"


def status_write(name: str, resource: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    return name == "replace_status" and resource is INFERENCE_REPLICAS


async def killed_at(cluster: Cluster, switch: KillSwitch, settings: PlanSettings) -> None:
    switch.running = await cluster.controller(settings, client=switch)
    await asyncio.wait_for(switch.fired.wait(), timeout=60)
    await switch.running.kill()


@pytest.mark.parametrize(
    ("point", "count"),
    [
        (pod_create, 1),  # the Create operations are stored, no pod is sent
        (pod_create, 4),  # half of a batch of 6 pods is sent
        (status_write, 2),  # the second pass dies before it stores anything
    ],
    ids=["before-first-create", "mid-batch", "before-second-status"],
)
async def test_a_scale_up_killed_at_a_request_resumes_without_duplicates(
    cluster: Cluster,
    kube: KubeClient,
    point: Matcher,
    count: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="omed")  # a failure shows the passes' log lines
    settings = PlanSettings(scale_up_pod_batch_size=6)
    runners = [
        {"name": "leader", "template": TEMPLATE},
        {"name": "worker", "size": 2, "template": TEMPLATE},
    ]
    await cluster.create(irep_body("chat-engine", replicas=4, runners=runners))
    await killed_at(cluster, KillSwitch(kube, point, count), settings)
    await cluster.controller(settings)
    try:
        await eventually(lambda: cluster.converged("chat-engine", 4, pods_each=3), what="4 x 3")
    except AssertionError as err:
        raise AssertionError(f"{err}: {await cluster.describe('chat-engine')}") from err
    assert {n: u for n, u in cluster.watch.uids.items() if len(u) > 1} == {}
    assert len(cluster.watch.uids) == 12


@pytest.mark.parametrize(
    ("point", "count"),
    [
        (gate_write, 1),  # the Delete operations are stored, no gate is written
        (pod_delete, 1),  # gates False and Ready False, step DeletePods stored, no delete sent
        (pod_delete, 2),  # one pod deleted, the other not
    ],
    ids=["before-gates", "before-deletes", "mid-deletes"],
)
async def test_a_scale_down_killed_at_a_request_resumes_and_loses_no_delete(
    cluster: Cluster, kube: KubeClient, point: Matcher, count: int
) -> None:
    settings = PlanSettings(scale_down_pod_batch_size=2)
    await cluster.create(irep_body("chat-engine", replicas=4))
    first = await cluster.controller(settings)
    await eventually(lambda: cluster.converged("chat-engine", 4), what="4 Instances")
    await first.kill()
    await cluster.scale("chat-engine", 1)
    await killed_at(cluster, KillSwitch(kube, point, count), settings)
    await cluster.controller(settings)
    await eventually(lambda: cluster.converged("chat-engine", 1), what="1 Instance")
    assert cluster.watch.routed_deletions == []
    assert len(cluster.watch.deleted) == 3
