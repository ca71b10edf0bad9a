"""The client limiter holds QPS and burst against the real API server, and says when it
held a request back for more than a second."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from omed.kube.client import KubeClient, load_config
from omed.kube.resources import CONFIGMAPS

pytestmark = pytest.mark.integration


async def test_limiter_holds_qps_and_burst(kubeconfig: str, namespace: str) -> None:
    qps, burst, window = 10.0, 20, 10.0
    client = KubeClient(await load_config(kubeconfig), qps=qps, burst=burst)
    done: list[float] = []
    started = time.monotonic()

    async def worker() -> None:
        while time.monotonic() - started < window:
            await client.list_page(CONFIGMAPS, namespace, limit=1)
            done.append(time.monotonic() - started)

    try:
        await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(16))), window + 10)
    finally:
        await client.close()
    in_window = sum(1 for t in done if t <= window)
    expected = burst + qps * window  # 120
    assert abs(in_window - expected) <= 0.1 * expected, (in_window, expected)
    # The burst is served at once, then no faster than qps.
    assert sum(1 for t in done if t <= 0.5) <= burst + qps * 0.5 + 1


async def test_waited_line_when_throttled(
    kubeconfig: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = KubeClient(await load_config(kubeconfig), qps=1, burst=1)
    caplog.set_level(logging.INFO, logger="omed.kube")
    try:
        await asyncio.gather(*(client.list_page(CONFIGMAPS, namespace) for _ in range(3)))
    finally:
        await client.close()
    waited: list[Any] = [
        r for r in caplog.records if r.getMessage() == "Waited before sending request"
    ]
    assert waited, "a request held back ~2 s must be logged"
    fields = waited[-1].kv  # type: ignore[attr-defined]
    assert fields["verb"] == "GET"
    assert f"/namespaces/{namespace}/configmaps" in fields["URL"]
    assert float(fields["delay"].rstrip("s")) > 1.0
