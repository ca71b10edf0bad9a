"""What ``kubectl ome`` imports, in a fresh interpreter: ``--help`` and the commands that only
read (``instance list``, ``instance status``, ``migration status``, ``migration history``)
import none of the manager, its libraries, the models and writers they don't use, or the
parts of the client's libraries the plugin never calls (docs/performance.md, "kubectl ome",
"Start-up").

Each command runs to its end here: its kubeconfig names a server on a port nothing
listens on, so the command loads the kubeconfig, opens its client, sends its first request
and prints its error; every import the command makes before its reads has been made by then.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from omed.kube.client import PROXY_VARIABLES

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
    "omed.kube.proxy",  # Go's proxy rules: imported only when a proxy variable is set
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models.v1_pod",
    "kubernetes_asyncio.watch",
    "importlib.metadata",  # omed's version: read when omed_build_info is collected
    "importlib.resources",  # importlib.abc's: the TLS import hook is a plain finder
    "dateutil.tz.tz",  # the time zones: dateutil.tz (deferred) binds them on first read
    "omed.statuscodec.encoder",  # a list is checked by omed.statuscodec.classes
    "omed.statuscodec.writing",
    "omed.config",  # the manager's ConfigMap entries (pydantic)
    "omed.api.base",  # the models
    "omed.api.gojson",  # the Go JSON encoder: the ledger's strings are omed.api.gostring
    "omed.cli.release_held",
    "omed.cli.migration_start",
    "omed.controllers.inferenceservice.core.project",
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
    environ = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(HEAVY), *argv],
        capture_output=True,
        text=True,
        check=True,
        env=environ,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_help_imports_none_of_the_heavy_modules() -> None:
    result = _run("--help")

    assert (result["code"], result["heavy"]) == (0, [])


CONTROLLER_PARTS = (
    "omed.controllers",
    "omed.controllers.inferencereplica",
    "omed.controllers.inferencereplica.core",
    "omed.controllers.inferenceservice",
    "omed.controllers.inferenceservice.core",
)
"""The packages above the controllers' pure modules the reports read (their ``__init__``
imports nothing)."""
MIGRATION_READS = (
    *CONTROLLER_PARTS[:4],
    "omed.controllers.inferencereplica.core.ops",
    "omed.controllers.inferencereplica.core.ops.migratenames",  # the reasons history names
    "omed.controllers.ledger",
    "omed.controllers.ledger.document",  # the audit ledger's rows
    "omed.controllers.owners",  # the ledger's owner reference
)
"""What the migration reports' module reads of the controllers (the same for both)."""
READ_ONLY: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "instance list": (("instance", "list", "chat"), ()),
    "instance status": (
        ("instance", "status", "chat", "0", "--component", "engine"),
        (
            *CONTROLLER_PARTS,
            "omed.controllers.inferencereplica.core.names",  # the pod names it parses
            "omed.controllers.inferenceservice.core.mode",  # the deployment mode's rule
        ),
    ),
    "migration status": (("migration", "status", "chat"), MIGRATION_READS),
    "migration history": (("migration", "history", "chat"), MIGRATION_READS),
}
"""Each command's words, and the pure modules of omed's heavy packages it may import."""


@pytest.mark.parametrize("command", sorted(READ_ONLY))
@pytest.mark.parametrize("scheme", ["https", "http"])
def test_read_only_commands_import_none_of_the_heavy_modules(
    tmp_path: Path, scheme: str, command: str
) -> None:
    port = _closed_port()
    config = _kubeconfig(tmp_path / "kubeconfig", f"{scheme}://127.0.0.1:{port}")
    words, allowed = READ_ONLY[command]

    result = _run(*words, "-n", "default", "--kubeconfig", str(config))

    assert result["code"] == 1
    assert f"127.0.0.1:{port}" in str(result["stderr"])  # it got as far as its first request
    assert [m for m in result["heavy"] if m not in allowed] == []
