"""The controllers' API client, fenced by the Lease: no write leaves once leadership is doubtful.

Why: a leader whose event loop stalled longer than the lease duration (stopped, starved of
CPU, swapped out, a long GC pause) runs its queued work the instant it resumes: reconciles
planned before the stall, pod creations that were waiting for the rate limiter, workers woken
by watch events that arrived meanwhile. By then a standby may lead. The renew loop notices
that the renew deadline has passed only when it next runs, which can be after those writes
went out. So the check is made per write, right before it is sent:
:meth:`omed.leaderelection.LeaderElector.check_fence` (a write passes only while the monotonic
clock is less than one renew deadline past the start of the last successful renew).

Where: twice per write, both synchronous. First in ``_headers``, after the rate limiter's
wait and the credentials, before a connection is taken: a write already refused costs no
connection. Then the check that makes the promise: aiohttp sends a request's headers and
body from a task of its own, a loop iteration or more after the request was handed to it,
so a stall can fall between the first check and the send. The body is therefore a
:class:`~omed.kube.client.CheckedBody`, which checks again inside the write that hands the
bytes (headers and body together) to the transport. A check only in the executors, before
the call into the client, would let a request that waited for the limiter across the
stall go out unchecked. Only requests with a body are fenced: ``create``, ``replace``,
``replace_status``, ``patch`` and ``delete`` (which sends its DeleteOptions); GETs, lists
and watches never are, so the caches keep working.

What is left: a request spends time in flight once written (in the kernel's buffers, on the
network, in the API server's queues); the fence's margin (lease duration minus renew
deadline: 20 s with the chart's timings) is for that. Events go through
their own, unfenced client: an Event is a record of what happened, not state a leader acts on,
and the ordered stop writes the queued ones after releasing the Lease.

Invariant: with leader election on, every mutating request of the controllers' client passes
the fence in the same synchronous step that writes its first byte; a refused one raises
:class:`~omed.leaderelection.WriteFenced` and no byte of it is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omed.kube.client import ClusterConfig, KubeClient

__all__ = ["FencedKubeClient"]


class FencedKubeClient(KubeClient):
    """A :class:`KubeClient` that calls ``fence()`` before each write takes a connection and
    again as its bytes are written."""

    def __init__(self, config: ClusterConfig, *, fence: Callable[[], None], **options: Any) -> None:
        super().__init__(config, write_check=fence, **options)
        self._fence = fence

    async def _headers(self, content_type: str | None) -> list[tuple[str, str]]:
        headers = await super()._headers(content_type)
        if content_type is not None:  # a request with a body: every write, and only writes
            self._fence()
        return headers
