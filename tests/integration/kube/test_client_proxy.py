"""Requests to the real API server through an HTTP CONNECT proxy, as HTTPS_PROXY, NO_PROXY
and a kubeconfig's proxy-url ask.

The API server is addressed as ``10.0.0.1`` (an IP in its serving certificate, like a
cluster's service IP): only the proxy below can reach it there (it tunnels that address to
the loopback port the test API server listens on), the way a corporate egress proxy is the
only way out of a locked-down network. Go never proxies loopback addresses, so the loopback
kubeconfig checks the bypass.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.kube.client import KubeClient, load_config
from omed.kube.resources import CONFIGMAPS, NAMESPACES

pytestmark = pytest.mark.integration

SERVICE_IP = "10.0.0.1"


@dataclasses.dataclass
class ConnectProxy:
    """A minimal HTTP CONNECT proxy: tunnels ``10.0.0.1:<port>`` to ``127.0.0.1:<port>``,
    and records every CONNECT target with its Proxy-Authorization header."""

    port: int = 0
    tunnels: list[tuple[str, str | None]] = dataclasses.field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        self.tunnels.append((target, headers.get("proxy-authorization")))
        host, _, port = target.rpartition(":")
        if method != "CONNECT" or host != SERVICE_IP:
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            with contextlib.suppress(Exception):
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    state = ConnectProxy()
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        await server.wait_closed()


def _kubeconfig_at(kubeconfig: str, tmp_path: Path, *, host: str, proxy_url: str = "") -> str:
    """A copy of ``kubeconfig`` whose cluster server is ``https://<host>:<port>``."""
    doc: dict[str, Any] = yaml.safe_load(Path(kubeconfig).read_text())
    for entry in doc["clusters"]:
        cluster = entry["cluster"]
        port = cluster["server"].rsplit(":", 1)[1]
        cluster["server"] = f"https://{host}:{port}"
        if proxy_url:
            cluster["proxy-url"] = proxy_url
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


async def test_https_proxy_carries_requests_and_watches(
    kubeconfig: str, namespace: str, proxy: ConnectProxy, tmp_path: Path
) -> None:
    path = _kubeconfig_at(kubeconfig, tmp_path, host=SERVICE_IP)
    environ = {"HTTPS_PROXY": f"http://omed:s%40cret@127.0.0.1:{proxy.port}"}
    config = await load_config(path, environ=environ)
    assert config.proxy == f"http://omed:s%40cret@127.0.0.1:{proxy.port}"
    # Printed, the config shows no password (Go's Redacted form); connecting uses it.
    assert "s%40cret" not in repr(config)
    assert f"http://omed:xxxxx@127.0.0.1:{proxy.port}" in repr(config)
    async with KubeClient(config) as client:
        listed = await client.list_page(NAMESPACES, None)
        assert namespace in {item["metadata"]["name"] for item in listed["items"]}
        # A watch streams through the same tunnel.
        created = await client.create(
            CONFIGMAPS, {"metadata": {"name": "through-proxy"}, "data": {}}, namespace
        )
        watch_path = CONFIGMAPS.path(namespace)
        params = {
            "watch": "true",
            "resourceVersion": "0",
            "fieldSelector": "metadata.name=through-proxy",
        }
        async with client.stream(watch_path, params=params, timeout=30) as lines:
            first = await asyncio.wait_for(anext(lines), 20)
        assert b"through-proxy" in first
        assert created["metadata"]["name"] == "through-proxy"
    assert proxy.tunnels, "every request must have gone through the proxy"
    port = config.host.rsplit(":", 1)[1]
    credentials = base64.b64encode(b"omed:s@cret").decode()
    assert {target for target, _ in proxy.tunnels} == {f"{SERVICE_IP}:{port}"}
    assert {auth for _, auth in proxy.tunnels} == {f"Basic {credentials}"}


async def test_no_proxy_range_and_loopback_go_direct(
    kubeconfig: str, namespace: str, proxy: ConnectProxy, tmp_path: Path
) -> None:
    proxied = {"HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}"}
    # The service range in NO_PROXY: no proxy for the API server.
    in_range = await load_config(
        _kubeconfig_at(kubeconfig, tmp_path, host=SERVICE_IP),
        environ={**proxied, "NO_PROXY": "localhost,10.0.0.0/8,.svc"},
    )
    assert in_range.proxy is None
    # Loopback is never proxied (Go's rule), whatever NO_PROXY says.
    loopback = await load_config(kubeconfig, environ=proxied)
    assert loopback.proxy is None
    async with KubeClient(loopback) as client:
        await client.get(NAMESPACES, namespace)
    assert proxy.tunnels == []


async def test_kubeconfig_proxy_url_wins_over_the_environment(
    kubeconfig: str, namespace: str, proxy: ConnectProxy, tmp_path: Path
) -> None:
    path = _kubeconfig_at(
        kubeconfig, tmp_path, host=SERVICE_IP, proxy_url=f"http://127.0.0.1:{proxy.port}"
    )
    config = await load_config(path, environ={"NO_PROXY": "*"})
    async with KubeClient(config) as client:
        await client.get(NAMESPACES, namespace)
    assert [target.split(":")[0] for target, _ in proxy.tunnels] == [SERVICE_IP]
