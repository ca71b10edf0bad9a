"""The Warning events a kubelet records for a failing container, as the simulated kubelet's.

Why: ``kubectl ome instance status`` shows the Warning events of an Instance's pods (reason
and count), and ``kubectl describe pod`` shows their messages; a simulated kubelet that wrote
only pod status would leave both empty where a real cluster has the story of a failure.

What is recorded (core/v1 Events, ``source.component: kubelet``, ``host`` the node), on each
transition of a container into a waiting reason, as kubelet does:

- ``ErrImagePull``: ``Failed``, ``Failed to pull image "<image>": ...``;
- ``ImagePullBackOff``: ``Failed``, ``Error: ImagePullBackOff``;
- ``CrashLoopBackOff``: ``BackOff``, ``Back-off restarting failed container <c> in pod
  <pod>_<namespace>(<uid>)``.

Repeats of one (pod uid, container, reason) are aggregated as kubelet's event correlator
does: one Event whose ``count`` and ``lastTimestamp`` move. Invariant: events are best effort,
as kubelet's are: a failed event write is counted in the stats and never delays or fails a
pod status write.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from omed.clock import Clock, rfc3339
from omed.kube.client import KubeClient
from omed.kube.resources import EVENTS
from omed.log import kv

log = logging.getLogger("omed_devcluster.simulator")

WATCHED_REASONS = ("ErrImagePull", "ImagePullBackOff", "CrashLoopBackOff")


@dataclasses.dataclass(frozen=True, slots=True)
class Occurrence:
    container: str
    waiting: str
    reason: str
    message: str


def _waiting(status: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """container -> (waiting reason, restartCount) of a pod status."""
    found: dict[str, tuple[str, int]] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for entry in status.get(key) or []:
            if not isinstance(entry, Mapping):
                continue
            waiting = (entry.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason") if isinstance(waiting, Mapping) else None
            restarts = entry.get("restartCount")
            found[str(entry.get("name"))] = (
                str(reason or ""),
                restarts if isinstance(restarts, int) else 0,
            )
    return found


def occurrences(
    before: Mapping[str, Any], after_status: Mapping[str, Any], *, images: Mapping[str, str]
) -> list[Occurrence]:
    """What kubelet would record between the pod ``before`` and its new status: each
    container that newly waits for a watched reason (a crash loop's every new back-off)."""
    meta = before.get("metadata") or {}
    old = _waiting(before.get("status") or {})
    found: list[Occurrence] = []
    for container, (reason, restarts) in _waiting(after_status).items():
        if reason not in WATCHED_REASONS or old.get(container) == (reason, restarts):
            continue
        image = images.get(container, "")
        if reason == "ErrImagePull":
            found.append(
                Occurrence(
                    container,
                    reason,
                    "Failed",
                    f'Failed to pull image "{image}": rpc error: code = NotFound desc = '
                    f'failed to pull and unpack image "{image}": not found (simulated)',
                )
            )
        elif reason == "ImagePullBackOff":
            found.append(Occurrence(container, reason, "Failed", "Error: ImagePullBackOff"))
        else:
            found.append(
                Occurrence(
                    container,
                    reason,
                    "BackOff",
                    f"Back-off restarting failed container {container} in pod "
                    f"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})",
                )
            )
    return found


class KubeletEvents:
    """Records and aggregates the simulated kubelets' Warning events."""

    def __init__(self, client: KubeClient, *, clock: Clock) -> None:
        self._client = client
        self._clock = clock
        self._recorded: dict[tuple[str, str, str, str], tuple[str, int]] = {}
        """(pod uid, container, event reason, message) -> (Event name, count)."""
        self.written = 0
        self.failed = 0

    async def record(
        self, before: Mapping[str, Any], after: Mapping[str, Any], *, node: str
    ) -> None:
        """Record what changed between the pod ``before`` and the pod ``after`` our write
        returned (never raises)."""
        spec = after.get("spec") or {}
        images = {
            str(c.get("name")): str(c.get("image") or "")
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        }
        for occurrence in occurrences(before, after.get("status") or {}, images=images):
            try:
                await self._write(after, occurrence, node=node)
                self.written += 1
            except Exception as exc:  # best effort, as kubelet's events: never fail a sync
                self.failed += 1
                log.debug("Could not record an event", extra=kv(error=str(exc)))

    async def _write(self, pod: Mapping[str, Any], occurrence: Occurrence, *, node: str) -> None:
        meta = pod.get("metadata") or {}
        uid, namespace = str(meta.get("uid")), str(meta.get("namespace"))
        key = (uid, occurrence.container, occurrence.reason, occurrence.message)
        now = rfc3339(self._clock.now())
        known = self._recorded.get(key)
        if known is not None:
            name, count = known
            await self._client.patch(
                EVENTS, name, {"count": count + 1, "lastTimestamp": now}, namespace
            )
            self._recorded[key] = (name, count + 1)
            return
        name = f"{meta.get('name')}.{uuid.uuid4().hex[:16]}"
        await self._client.create(
            EVENTS,
            {
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta.get("name"),
                    "namespace": namespace,
                    "uid": uid,
                    "fieldPath": f"spec.containers{{{occurrence.container}}}",
                },
                "reason": occurrence.reason,
                "message": occurrence.message,
                "type": "Warning",
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": {"component": "kubelet", "host": node},
                "reportingComponent": "kubelet",
                "reportingInstance": node,
            },
            namespace,
        )
        self._recorded[key] = (name, 1)

    def forget(self, uid: str) -> None:
        """Drop a removed pod's aggregation keys."""
        for key in [k for k in self._recorded if k[0] == uid]:
            del self._recorded[key]
