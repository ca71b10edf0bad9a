"""The client's 401 path against the real API server: a request answered 401 is sent once
more, with the same body, when the exec plugin gives a new token; a second 401 fails; a 401
with no new token fails at once; and a watch whose token was revoked opens again with the
plugin's next token.

The exec plugin (a Python script the test writes) hands out the tokens of a file, one a run
(the last one again once they run out), without an expiry, so only a 401 makes the client run
it again (:class:`~omed.kube.credentials.ExecCredentials`). The tokens are TokenRequest tokens
of ServiceAccounts of the test's namespace, which a Role lets read, watch and create
ConfigMaps there; a token is revoked for real by deleting its ServiceAccount and waiting
until the API server answers 401 to it (its token cache forgets a token within 10 s). What
the client sent is counted in ``rest_client_requests_total``, by code and verb.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import stat
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
import pytest
import yaml

from omed.kube.client import KubeClient, Resource, load_config
from omed.kube.credentials import ExecCredentials
from omed.kube.errors import Unauthorized
from omed.kube.resources import CONFIGMAPS, SERVICE_ACCOUNTS
from omed.metrics import REGISTRY

pytestmark = pytest.mark.integration

ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")

PLUGIN = '''#!PYTHON
"""An exec credential plugin: the tokens of PLUGIN_TOKENS, one a run, the last one again once
they run out; no expirationTimestamp."""
import json, os

tokens = open(os.environ["PLUGIN_TOKENS"]).read().split()
with open(os.environ["PLUGIN_LOG"], "a") as log:
    log.write("run\\n")
runs = len(open(os.environ["PLUGIN_LOG"]).read().splitlines())
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {"token": tokens[min(runs, len(tokens)) - 1]},
}))
'''


@dataclass
class Plugin:
    """The plugin's kubeconfig, and how many times it ran."""

    kubeconfig: str
    log: Path
    host: str

    def runs(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


@dataclass
class Accounts:
    """Makes ServiceAccounts of the namespace and tokens of them, and revokes those."""

    kube: KubeClient
    control_plane: Any
    namespace: str

    async def token(self) -> tuple[str, str]:
        """A new ServiceAccount's name and a TokenRequest token of it."""
        name = f"sa-{uuid.uuid4().hex[:10]}"
        await self.kube.create(SERVICE_ACCOUNTS, {"metadata": {"name": name}}, self.namespace)
        issued = await self.kube.request(
            "POST",
            SERVICE_ACCOUNTS.path(self.namespace, name, "token"),
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600},
            },
        )
        return name, str(issued["status"]["token"])

    async def revoke(self, name: str, token: str) -> None:
        """Delete the ServiceAccount; return once the API server refuses its token."""
        await self.kube.delete(SERVICE_ACCOUNTS, name, self.namespace)
        deadline = time.monotonic() + 30
        while await self.status_with(token) != 401:
            assert time.monotonic() < deadline, "the revoked token still authenticates"
            await asyncio.sleep(0.5)

    async def revoked_token(self) -> str:
        name, token = await self.token()
        await self.revoke(name, token)
        return token

    async def status_with(self, token: str) -> int:
        """The API server's answer to a request made with ``token`` alone."""
        context = ssl.create_default_context(cafile=str(self.control_plane.ca_path))
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
            session.get(
                f"{self.control_plane.url}/api/v1/namespaces/{self.namespace}/configmaps",
                headers={"Authorization": f"Bearer {token}"},
            ) as answer,
        ):
            return answer.status


@pytest.fixture
async def accounts(kube: KubeClient, namespace: str, control_plane: Any) -> Accounts:
    """Every ServiceAccount of ``namespace`` may get, list, watch and create its ConfigMaps."""
    await kube.create(
        ROLES,
        {
            "metadata": {"name": "configmaps"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "verbs": ["get", "list", "watch", "create"],
                }
            ],
        },
        namespace,
    )
    await kube.create(
        ROLE_BINDINGS,
        {
            "metadata": {"name": "configmaps"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "configmaps",
            },
            "subjects": [
                {
                    "kind": "Group",
                    "apiGroup": "rbac.authorization.k8s.io",
                    "name": f"system:serviceaccounts:{namespace}",
                }
            ],
        },
        namespace,
    )
    return Accounts(kube=kube, control_plane=control_plane, namespace=namespace)


def write_plugin(tmp_path: Path, control_plane: Any, tokens: list[str]) -> Plugin:
    """The plugin handing out ``tokens``, and a kubeconfig of the test API server whose user
    runs it."""
    script = tmp_path / "credential-plugin"
    script.write_text(PLUGIN.replace("PYTHON", sys.executable, 1))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "tokens").write_text("\n".join(tokens) + "\n")
    log = tmp_path / "plugin.log"
    document = control_plane.kubeconfig()
    document["users"] = [
        {
            "name": "admin",
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": str(script),
                    "env": [
                        {"name": "PLUGIN_TOKENS", "value": str(tmp_path / "tokens")},
                        {"name": "PLUGIN_LOG", "value": str(log)},
                    ],
                    "interactiveMode": "Never",
                }
            },
        }
    ]
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return Plugin(kubeconfig=str(path), log=log, host=urlsplit(control_plane.url).netloc)


def sent(plugin: Plugin, code: int, verb: str) -> float:
    """How many requests of ``verb`` this process's clients got ``code`` for from the API
    server so far."""
    labels = {"code": str(code), "method": verb, "host": plugin.host}
    return REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0


@contextlib.asynccontextmanager
async def client_of(plugin: Plugin) -> AsyncIterator[KubeClient]:
    """A client of the plugin's kubeconfig (its load runs the plugin once)."""
    config = await load_config(plugin.kubeconfig, environ={})
    assert isinstance(config.credentials, ExecCredentials)
    async with KubeClient(config, timeout=10) as client:
        yield client


async def test_a_401_sends_the_same_body_again_with_the_next_token(
    accounts: Accounts, control_plane: Any, kube: KubeClient, tmp_path: Path
) -> None:
    """The first token was revoked: the create is answered 401, the plugin runs again, and
    the same body, sent once more with the new token, is stored."""
    _, fresh = await accounts.token()
    plugin = write_plugin(tmp_path, control_plane, [await accounts.revoked_token(), fresh])
    refused, created = sent(plugin, 401, "POST"), sent(plugin, 201, "POST")
    body = {"metadata": {"name": "resent"}, "data": {"k": "v", "note": "caf\u00e9\ntwo lines"}}
    async with client_of(plugin) as client:
        answer = await client.create(CONFIGMAPS, body, accounts.namespace)
    assert answer["metadata"]["name"] == "resent"
    assert plugin.runs() == 2  # the load's run, and one after the 401
    assert (sent(plugin, 401, "POST") - refused, sent(plugin, 201, "POST") - created) == (1, 1)
    stored = await kube.get(CONFIGMAPS, "resent", accounts.namespace)
    assert stored["data"] == body["data"]


async def test_a_second_401_fails(accounts: Accounts, control_plane: Any, tmp_path: Path) -> None:
    """Both tokens the plugin hands out are revoked: the request is sent with each, once,
    then fails with the second 401; the plugin isn't run a third time."""
    tokens = [await accounts.revoked_token(), await accounts.revoked_token()]
    plugin = write_plugin(tmp_path, control_plane, tokens)
    before = sent(plugin, 401, "GET")
    async with client_of(plugin) as client:
        with pytest.raises(Unauthorized):
            await client.get(CONFIGMAPS, "anything", accounts.namespace)
        assert plugin.runs() == 2
        assert sent(plugin, 401, "GET") - before == 2


async def test_a_401_without_a_new_token_fails_at_once(
    accounts: Accounts, control_plane: Any, tmp_path: Path
) -> None:
    """The plugin hands out the revoked token again: nothing new to send, so the 401 fails
    the request without sending it twice."""
    plugin = write_plugin(tmp_path, control_plane, [await accounts.revoked_token()])
    before = sent(plugin, 401, "GET")
    async with client_of(plugin) as client:
        with pytest.raises(Unauthorized):
            await client.get(CONFIGMAPS, "anything", accounts.namespace)
        assert plugin.runs() == 2  # run again after the 401: it gave the same token
        assert sent(plugin, 401, "GET") - before == 1


async def _event(lines: AsyncIterator[bytes], name: str) -> dict[str, Any]:
    """The first watch event of the ConfigMap ``name``."""
    async for line in lines:
        event: dict[str, Any] = orjson.loads(line)
        if event["object"]["metadata"]["name"] == name:
            return event
    raise AssertionError(f"the watch ended before an event of {name}")


async def _drain(lines: AsyncIterator[bytes]) -> None:
    async for _ in lines:
        pass


async def test_a_watch_opens_again_with_the_next_token_after_its_token_is_revoked(
    accounts: Accounts, control_plane: Any, kube: KubeClient, tmp_path: Path
) -> None:
    """A watch runs on the first token until the API server ends it; the token is revoked;
    opened again from where it stopped (as a reflector does), the watch is answered 401, the
    plugin runs again, and it opens with the new token and delivers what happens next."""
    first_account, first = await accounts.token()
    _, second = await accounts.token()
    plugin = write_plugin(tmp_path, control_plane, [first, second])
    await kube.create(CONFIGMAPS, {"metadata": {"name": "before"}}, accounts.namespace)
    path = CONFIGMAPS.path(accounts.namespace)
    async with client_of(plugin) as client:
        async with client.stream(
            path, params={"watch": "true", "timeoutSeconds": 2}, timeout=30
        ) as lines:
            added = await _event(lines, "before")
            assert added["type"] == "ADDED"
            await asyncio.wait_for(_drain(lines), timeout=20)  # ended by the API server
        version = added["object"]["metadata"]["resourceVersion"]
        await accounts.revoke(first_account, first)
        refused = sent(plugin, 401, "WATCH")
        params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": 30}
        async with client.stream(path, params=params, timeout=60) as lines:
            await kube.create(CONFIGMAPS, {"metadata": {"name": "after"}}, accounts.namespace)
            event = await asyncio.wait_for(_event(lines, "after"), timeout=20)
        assert event["type"] == "ADDED"
        assert plugin.runs() == 2
        assert sent(plugin, 401, "WATCH") - refused == 1
    assert await accounts.status_with(second) != 401
