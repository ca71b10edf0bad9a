"""Credentials that expire, against the real API server: a kubeconfig ``exec`` plugin whose
tokens die 20 seconds after it hands them out.

The plugin (a Python script the test writes) creates a fresh ServiceAccount, asks the API
server's TokenRequest API for a token of it (600 s, the shortest TokenRequest allows) and
prints it as an ExecCredential whose ``status.expirationTimestamp`` is 20 s away. The test
makes the token die then for real: a revoker deletes each ServiceAccount 20 s after the
plugin made it, and a deleted ServiceAccount's tokens stop authenticating (after at most the
API server's 10 s token cache). A client that ran the plugin once would get 401 from about
the 30th second on; omed's runs it again shortly before each expiry, and on a 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import stat
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from omed.kube.client import KubeClient, Resource, load_config
from omed.kube.errors import NotFound
from omed.kube.resources import NAMESPACES, SERVICE_ACCOUNTS

pytestmark = pytest.mark.integration

LIFETIME = 20
"""Seconds each token lives: its expirationTimestamp, and when the revoker deletes it."""

CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)

PLUGIN = '''#!{python}
"""An exec credential plugin: a token of a new ServiceAccount, said to expire in LIFETIME s."""
import datetime, json, os, ssl, sys, urllib.request, uuid

env = os.environ
info = json.loads(env["KUBERNETES_EXEC_INFO"])
context = ssl.create_default_context(cafile=env["PLUGIN_CA"])
context.load_cert_chain(env["PLUGIN_CERT"], env["PLUGIN_KEY"])


def post(path, body):
    request = urllib.request.Request(
        env["PLUGIN_SERVER"] + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={{"Content-Type": "application/json"}},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return json.loads(answer.read())


namespace = env["PLUGIN_NAMESPACE"]
name = "token-" + uuid.uuid4().hex[:10]
post(f"/api/v1/namespaces/{{namespace}}/serviceaccounts", {{"metadata": {{"name": name}}}})
issued = post(
    f"/api/v1/namespaces/{{namespace}}/serviceaccounts/{{name}}/token",
    {{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
     "spec": {{"expirationSeconds": 600}}}},
)
now = datetime.datetime.now(datetime.timezone.utc)
expires = now + datetime.timedelta(seconds=int(env["PLUGIN_LIFETIME"]))
token = issued["status"]["token"]
with open(env["PLUGIN_LOG"], "a") as log:
    log.write(json.dumps({{"name": name, "at": now.timestamp(), "token": token,
                          "apiVersion": info["apiVersion"]}}) + "\\n")
print(json.dumps({{
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {{"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}},
}}))
'''


@dataclass
class Plugin:
    kubeconfig: str
    log: Path
    namespace: str

    def runs(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


def _write_plugin(tmp_path: Path, control_plane: Any, namespace: str) -> Plugin:
    """The plugin script, and a kubeconfig of the test API server whose user runs it."""
    script = tmp_path / "credential-plugin"
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "plugin.log"
    env = {
        "PLUGIN_SERVER": control_plane.url,
        "PLUGIN_CA": str(control_plane.ca_path),
        "PLUGIN_CERT": str(control_plane.client_cert_path),
        "PLUGIN_KEY": str(control_plane.client_key_path),
        "PLUGIN_NAMESPACE": namespace,
        "PLUGIN_LIFETIME": str(LIFETIME),
        "PLUGIN_LOG": str(log),
    }
    admin = control_plane.kubeconfig()
    admin["users"] = [
        {
            "name": "admin",
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": str(script),
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                    "interactiveMode": "Never",
                }
            },
        }
    ]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(admin))
    return Plugin(kubeconfig=str(path), log=log, namespace=namespace)


@pytest.fixture
async def plugin(
    kube: KubeClient, namespace: str, control_plane: Any, tmp_path: Path
) -> AsyncIterator[Plugin]:
    """A kubeconfig whose user is the exec plugin; every ServiceAccount of ``namespace`` may
    get namespaces (one ClusterRoleBinding to the namespace's ServiceAccount group)."""
    name = f"omed-credentials-{uuid.uuid4().hex[:8]}"
    await kube.create(
        CLUSTER_ROLES,
        {
            "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}],
        },
    )
    await kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {
                    "kind": "Group",
                    "apiGroup": "rbac.authorization.k8s.io",
                    "name": f"system:serviceaccounts:{namespace}",
                }
            ],
        },
    )
    written = _write_plugin(tmp_path, control_plane, namespace)
    try:
        yield written
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(CLUSTER_ROLE_BINDINGS, name)
        with contextlib.suppress(NotFound):
            await kube.delete(CLUSTER_ROLES, name)


@contextlib.asynccontextmanager
async def revoking(kube: KubeClient, plugin: Plugin, *, after: float) -> AsyncIterator[set[str]]:
    """Delete each ServiceAccount the plugin made ``after`` seconds after it made it; yields
    the names deleted so far."""
    deleted: set[str] = set()

    async def revoke() -> None:
        while True:
            for run in plugin.runs():
                if run["name"] not in deleted and time.time() - run["at"] >= after:
                    with contextlib.suppress(NotFound):
                        await kube.delete(SERVICE_ACCOUNTS, run["name"], plugin.namespace)
                    deleted.add(run["name"])
            await asyncio.sleep(0.25)

    task = asyncio.create_task(revoke())
    try:
        yield deleted
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _status_with(control_plane: Any, token: str) -> int:
    """The API server's answer to a request made with ``token`` alone."""
    connector = aiohttp.TCPConnector(ssl=_ca_only(control_plane))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(
            f"{control_plane.url}/api/v1/namespaces/default",
            headers={"Authorization": f"Bearer {token}"},
        ) as answer,
    ):
        return answer.status


def _ca_only(control_plane: Any) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(control_plane.ca_path))


@pytest.mark.slow
async def test_exec_tokens_that_expire_are_refreshed_past_the_first_ones_death(
    kube: KubeClient, plugin: Plugin, control_plane: Any
) -> None:
    """Requests every second go on until the first token is refused by the API server and a
    request has succeeded after that (about 30 s): the client ran the plugin again in time."""
    failures: list[str] = []
    requests = 0
    first_dead_at: float | None = None
    succeeded_after_death = False
    async with (
        revoking(kube, plugin, after=LIFETIME) as revoked,
        KubeClient(await load_config(plugin.kubeconfig, environ={}), timeout=10) as client,
    ):
        began = time.monotonic()
        while not succeeded_after_death and time.monotonic() - began < 90:
            requests += 1
            try:
                await client.get(NAMESPACES, plugin.namespace)
            except Exception as exc:  # every failure is reported, not only the first
                failures.append(f"{time.monotonic() - began:.1f}s: {type(exc).__name__}: {exc}")
            else:
                succeeded_after_death = first_dead_at is not None
            ran = plugin.runs()
            if (
                first_dead_at is None
                and ran
                and await _status_with(control_plane, ran[0]["token"]) == 401
            ):
                first_dead_at = time.monotonic() - began
            await asyncio.sleep(1)
        runs = plugin.runs()
        assert failures == [], f"{len(failures)} of {requests} requests failed: {failures}"
        assert first_dead_at is not None, "the first token was never refused"
        assert succeeded_after_death, "no request succeeded after the first token died"
        assert len(runs) >= 2, runs
        assert runs[0]["apiVersion"] == "client.authentication.k8s.io/v1"
        # The revoker did kill the first token while the client ran: a client that kept it
        # would have failed from first_dead_at on.
        assert runs[0]["name"] in revoked
        assert await _status_with(control_plane, runs[-1]["token"]) != 401


async def test_a_401_runs_the_plugin_again_and_sends_the_request_once_more(
    kube: KubeClient, plugin: Plugin, control_plane: Any
) -> None:
    async with KubeClient(await load_config(plugin.kubeconfig, environ={}), timeout=10) as client:
        await client.get(NAMESPACES, plugin.namespace)
        first = plugin.runs()
        assert len(first) == 1
        # Revoke the token long before its expiry: the next request is answered 401 (once
        # the API server's token cache has forgotten it), the client runs the plugin again
        # and sends the request with the new token.
        await kube.delete(SERVICE_ACCOUNTS, first[0]["name"], plugin.namespace)
        deadline = time.monotonic() + 30
        while await _status_with(control_plane, first[0]["token"]) != 401:
            assert time.monotonic() < deadline, "the revoked token still authenticates"
            await asyncio.sleep(0.5)
        answer = await client.get(NAMESPACES, plugin.namespace)
        assert answer["metadata"]["name"] == plugin.namespace
        assert len(plugin.runs()) == 2
