"""kubernetes-asyncio's kubeconfig loaders without its generated client
(omed.kube.kubeconfig_loaders): each check runs in a fresh interpreter, since this test
process may have imported the whole library already (which the module then leaves alone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml


def _run(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it prints one JSON object last."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


GENERATED = """
import sys
def generated():
    return sorted(
        m for m in sys.modules
        if m.startswith(("kubernetes_asyncio.client.api.", "kubernetes_asyncio.client.models.",
                         "kubernetes_asyncio.watch", "kubernetes_asyncio.dynamic",
                         "kubernetes_asyncio.stream", "kubernetes_asyncio.utils"))
        or m == "kubernetes_asyncio.client.api"
    )
"""


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://127.0.0.1:6443/"}},
                ],
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    return path


def test_loading_a_kubeconfig_imports_none_of_the_generated_client(tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path)
    result = _run(
        GENERATED
        + f"""
import asyncio, json
from omed.kube.client import load_config
from omed.cli.kubectl_ome_instance import default_namespace
config = asyncio.run(load_config({str(kubeconfig)!r}))
print(json.dumps({{
    "host": config.host,
    "token": asyncio.run(config.credentials.authorization()) if config.credentials else None,
    "namespace": default_namespace({str(kubeconfig)!r}, None),
    "generated": generated(),
}}))
"""
    )
    assert result == {
        "host": "https://127.0.0.1:6443",
        "token": "Bearer abc",
        "namespace": "default",
        "generated": [],
    }


def test_the_library_reads_as_documented_after_the_loaders_import() -> None:
    result = _run(
        GENERATED
        + """
import asyncio, json
import omed.kube.kubeconfig_loaders as loaders
before = generated()
import kubernetes_asyncio
from kubernetes_asyncio import client, watch, dynamic, stream, utils
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import kube_config

class Answer:
    data = '{"metadata": {"name": "chat", "namespace": "ome"}}'

async def deserialize():
    async with ApiClient(Configuration()) as api:
        return api.deserialize(Answer(), "V1Pod").metadata.name

print(json.dumps({
    "before": before,
    "version": kubernetes_asyncio.__version__ == client.__version__,
    "api": client.CoreV1Api.__module__,
    "model": client.V1Pod is client.models.V1Pod,
    "same_classes": [
        kube_config.ApiClient is ApiClient is client.api_client.ApiClient,
        loaders.Configuration is Configuration is client.Configuration,
    ],
    "watch": watch.Watch.__name__,
    "dynamic": dynamic.DynamicClient.__name__,
    "deserialized": asyncio.run(deserialize()),
    "deferred_left": [m for m in ("kubernetes_asyncio", "kubernetes_asyncio.client",
                      "kubernetes_asyncio.client.models")
                      if "__getattr__" in sys.modules[m].__dict__],
}))
"""
    )
    assert result == {
        "before": [],
        "version": True,
        "api": "kubernetes_asyncio.client.api.core_v1_api",
        "model": True,
        "same_classes": [True, True],
        "watch": "Watch",
        "dynamic": "DynamicClient",
        "deserialized": "chat",
        "deferred_left": [],
    }


def test_a_library_imported_first_is_left_as_it_is() -> None:
    result = _run(
        """
import json, sys
import kubernetes_asyncio
import omed.kube.kubeconfig_loaders as loaders
from kubernetes_asyncio.client import Configuration
print(json.dumps({
    "deferred": [m for m in sys.modules if m.startswith("kubernetes_asyncio")
                 and "__getattr__" in sys.modules[m].__dict__],
    "same": loaders.Configuration is Configuration,
}))
"""
    )
    assert result == {"deferred": [], "same": True}
