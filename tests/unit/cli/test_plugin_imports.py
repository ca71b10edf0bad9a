"""What ``kubectl ome`` imports, in a fresh interpreter: ``--help`` and ``instance list``
import none of the manager, its libraries, or the parts of the client's libraries the plugin
never calls (docs/performance.md, "kubectl ome", "Start-up").

``instance list`` runs to its end here: its kubeconfig names a server on a port nothing
listens on, so the command loads the kubeconfig, opens its client, sends its first request
and prints its error; every import the command makes before its reads has been made by then.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "omed.controllers",
    "omed.manager",
    "omed.webhooks",
    "omed.informers",
    "omed.leaderelection",
    "aiohttp.web",
    "pydantic",
    "prometheus_client.exposition",  # prometheus_client's __init__: its HTTP server and push
    "http.server",
    "wsgiref",
    "urllib3.poolmanager",  # urllib3's __init__: its connection pools
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models.v1_pod",
    "kubernetes_asyncio.watch",
    "importlib.metadata",  # omed's version: read when omed_build_info is collected
    "importlib.resources",  # importlib.abc's: the TLS import hook is a plain finder
    "dateutil.tz.tz",  # the time zones: dateutil.tz (deferred) binds them on first read
)
"""Packages and modules neither command needs (a package stands for all its modules)."""

SCRIPT = """
import json, sys
from omed.cli import kubectl_ome
code = kubectl_ome.main(sys.argv[2:])
heavy = sorted(m for m in sys.modules for h in json.loads(sys.argv[1])
               if m == h or m.startswith(h + "."))
print(json.dumps({"code": code, "heavy": heavy, "modules": len(sys.modules)}))
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def _run(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(HEAVY), *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_help_imports_none_of_the_heavy_modules() -> None:
    result = _run("--help")

    assert (result["code"], result["heavy"]) == (0, [])


@pytest.mark.parametrize("scheme", ["https", "http"])
def test_instance_list_imports_none_of_the_heavy_modules(tmp_path: Path, scheme: str) -> None:
    port = _closed_port()
    config = _kubeconfig(tmp_path / "kubeconfig", f"{scheme}://127.0.0.1:{port}")

    result = _run("instance", "list", "chat", "-n", "default", "--kubeconfig", str(config))

    assert result["code"] == 1
    assert f"127.0.0.1:{port}" in str(result["stderr"])  # it got as far as its first request
    assert result["heavy"] == []
