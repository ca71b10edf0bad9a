"""``kubectl ome instance list`` through the real kubectl, against the real API server: kubectl
finds the plugin on the PATH and runs it, the plugin reads the InferenceService and its
InferenceReplicas, and the modules it imports on the way (``PYTHONPROFILEIMPORTTIME``, which
the plugin's interpreter writes on the stderr kubectl passes through) include none of the
manager or of the parts of the client's libraries the command never calls
(tests/unit/cli/test_plugin_imports.py, whose list this reads)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest

from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_REPLICAS

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
HEAVY: tuple[str, ...] = runpy.run_path(str(ROOT / "tests/unit/cli/test_plugin_imports.py"))[
    "HEAVY"
]
_IMPORTED = re.compile(r"import time:\s+\d+ \|\s+\d+ \| *(\S+)")


async def test_instance_list_through_kubectl_reads_the_replicas_and_imports_nothing_heavy(
    kube: KubeClient, kubeconfig: str, namespace: str, chat: Any
) -> None:
    from omed_devcluster.binaries import ensure_binaries

    service = await chat.service()
    await kube.create(
        INFERENCE_REPLICAS, chat.replica("chat-engine", service["metadata"]["uid"]), namespace
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),  # this checkout's omed, whatever the editable install names
        "PYTHONPROFILEIMPORTTIME": "1",
        "KUBECONFIG": kubeconfig,
    }
    argv = [str(ensure_binaries().kubectl), "ome", "instance", "list", "chat", "-n", namespace]
    proc = await asyncio.create_subprocess_exec(
        *argv, "-o", "json", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)

    assert proc.returncode == 0, err.decode()[-2000:]
    report = json.loads(out)
    assert report["kind"] == "InstanceListReport"
    assert [c["inferenceReplica"] for c in report["components"]] == ["chat-engine"]
    imported = [m.group(1) for line in err.decode().splitlines() if (m := _IMPORTED.match(line))]
    # the plugin's own interpreter reported (a module imported by importlib.import_module,
    # as the plugin imports a command's module, has no line of its own: those it imports do)
    assert {"omed.cli.instances", "omed.kube.kubeconfig_loaders"} <= set(imported)
    heavy = sorted({m for m in imported for h in HEAVY if m == h or m.startswith(h + ".")})
    assert heavy == []
