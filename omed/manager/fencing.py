"""The controllers' API client, fenced by the Lease: no write leaves once leadership is doubtful.

Why: a leader whose event loop stalled longer than the lease duration (stopped, starved of
CPU, swapped out, a long GC pause) runs its queued work the instant it resumes: reconciles
planned before the stall, pod creations that were waiting for the rate limiter, workers woken
by watch events that arrived meanwhile. By then a standby may lead. The renew loop notices
that the renew deadline has passed only when it next runs, which can be after those writes
went out. So the check is made per write, right before it is sent:
:meth:`omed.leaderelection.LeaderElector.check_fence` (a write passes only while the monotonic
clock is less than one renew deadline past the start of the last successful renew).

Where: :class:`FencedKubeClient` checks in ``_headers``, the last step of
:class:`~omed.kube.client.KubeClient` before aiohttp sends the request, after the rate
limiter's wait and the credentials, with no await between the check and the request being
handed to aiohttp. A check in the executors, before the call into the client, would let a
request that waited for the limiter across the stall go out unchecked. Only requests with a
body are fenced: ``create``, ``replace``, ``replace_status``, ``patch`` and ``delete`` (which
sends its DeleteOptions); GETs, lists and watches never are, so the caches keep working.

What is left: a request that needs a new connection still goes through connect and the TLS
handshake after the check, and any request spends time in flight; the fence's margin (lease
duration minus renew deadline: 20 s with the chart's timings) is for that. Events go through
their own, unfenced client: an Event is a record of what happened, not state a leader acts on,
and the ordered stop writes the queued ones after releasing the Lease.

Invariant: with leader election on, every mutating request of the controllers' client passes
the fence immediately before it is sent; a refused one raises
:class:`~omed.leaderelection.WriteFenced` and is never sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omed.kube.client import ClusterConfig, KubeClient

__all__ = ["FencedKubeClient"]


class FencedKubeClient(KubeClient):
    """A :class:`KubeClient` that calls ``fence()`` right before sending each write."""

    def __init__(self, config: ClusterConfig, *, fence: Callable[[], None], **options: Any) -> None:
        super().__init__(config, **options)
        self._fence = fence

    async def _headers(self, content_type: str | None) -> list[tuple[str, str]]:
        headers = await super()._headers(content_type)
        if content_type is not None:  # a request with a body: every write, and only writes
            self._fence()
        return headers
