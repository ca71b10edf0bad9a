"""Credentials that expire (omed.kube.credentials), on an injected clock: when each kind is
refreshed, what a 401 does, what a failed refresh keeps; and load_config choosing the kind
from a kubeconfig (a real exec plugin script, a tokenFile, an OIDC auth-provider against a
fake identity provider, which is not the API server) or the in-cluster token file. The
client's 401 path (a request sent again once, a second 401 failing, a watch opened again) is
tested against the real API server in tests/integration/kube/test_client_unauthorized.py."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import stat
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from omed.clock import FakeClock, rfc3339
from omed.kube.client import load_config
from omed.kube.credentials import (
    AuthProviderCredentials,
    CredentialsError,
    ExecCredentials,
    StaticCredentials,
    TokenFile,
    refresh_margin,
    run_exec_plugin,
)

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Plugin:
    """A fake exec plugin: each run hands out ``token-<n>`` living ``lifetime`` seconds on the
    clock (``None``: no expiry); ``fail`` makes the next runs raise; ``gate`` holds a run."""

    def __init__(self, clock: FakeClock, lifetime: float | None = 60.0) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.runs = 0
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def __call__(self) -> Mapping[str, Any]:
        self.runs += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise RuntimeError("exec: process returned 1. no network")
        status: dict[str, Any] = {"token": f"token-{self.runs}"}
        if self.lifetime is not None:
            status["expirationTimestamp"] = rfc3339(
                self.clock.now() + dt.timedelta(seconds=self.lifetime)
            )
        return status


def exec_credentials(plugin: Plugin) -> ExecCredentials:
    return ExecCredentials(plugin, command="plugin", clock=plugin.clock)


def test_the_margin_is_a_quarter_of_the_life_at_most_10_seconds() -> None:
    assert refresh_margin(3600) == 10.0
    assert refresh_margin(20) == 5.0
    assert refresh_margin(-5) == 0.0


async def test_an_exec_token_is_kept_until_shortly_before_its_expiry() -> None:
    clock = FakeClock(START)
    plugin = Plugin(clock, lifetime=20)
    credentials = exec_credentials(plugin)
    assert await credentials.authorization() == "Bearer token-1"
    clock.advance(14.9)
    assert await credentials.authorization() == "Bearer token-1"
    assert plugin.runs == 1
    clock.advance(0.1)  # 5 s (a quarter of 20) before the expiry
    assert await credentials.authorization() == "Bearer token-2"
    assert plugin.runs == 2


async def test_an_exec_token_of_an_hour_is_replaced_10_seconds_early() -> None:
    clock = FakeClock(START)
    plugin = Plugin(clock, lifetime=3600)
    credentials = exec_credentials(plugin)
    await credentials.authorization()
    clock.advance(3589.9)
    assert await credentials.authorization() == "Bearer token-1"
    clock.advance(0.1)
    assert await credentials.authorization() == "Bearer token-2"


async def test_the_token_from_the_load_is_used_first() -> None:
    clock = FakeClock(START)
    plugin = Plugin(clock, lifetime=20)
    initial = {"token": "loaded", "expirationTimestamp": START + dt.timedelta(seconds=20)}
    credentials = ExecCredentials(plugin, command="plugin", clock=clock, initial=initial)
    assert await credentials.authorization() == "Bearer loaded"
    assert plugin.runs == 0
    clock.advance(15)
    assert await credentials.authorization() == "Bearer token-1"


async def test_an_exec_token_without_expiry_is_kept_until_a_401() -> None:
    clock = FakeClock(START)
    plugin = Plugin(clock, lifetime=None)
    credentials = exec_credentials(plugin)
    assert await credentials.authorization() == "Bearer token-1"
    clock.advance(86400 * 30)
    assert await credentials.authorization() == "Bearer token-1"
    assert await credentials.refresh_after_unauthorized("Bearer token-1") is True
    assert await credentials.authorization() == "Bearer token-2"
    assert plugin.runs == 2


async def test_requests_at_an_expiry_wait_for_one_plugin_run() -> None:
    clock = FakeClock(START)
    plugin = Plugin(clock, lifetime=20)
    credentials = exec_credentials(plugin)
    await credentials.authorization()
    clock.advance(20)
    plugin.gate = asyncio.Event()
    waiting = [asyncio.create_task(credentials.authorization()) for _ in range(20)]
    await asyncio.sleep(0)
    plugin.gate.set()
    assert set(await asyncio.gather(*waiting)) == {"Bearer token-2"}
    assert plugin.runs == 2


async def test_401s_of_one_token_run_the_plugin_once() -> None:
    clock = FakeClock(START)
    plugin = Plugin(clock, lifetime=None)
    credentials = exec_credentials(plugin)
    await credentials.authorization()
    answers = await asyncio.gather(
        *(credentials.refresh_after_unauthorized("Bearer token-1") for _ in range(5))
    )
    assert answers == [True] * 5
    assert plugin.runs == 2


async def test_a_401_to_the_same_token_again_says_no_retry() -> None:
    """A plugin that hands out the token the API server refused: nothing to send again."""
    clock = FakeClock(START)

    async def same() -> Mapping[str, Any]:
        return {"token": "dead"}

    credentials = ExecCredentials(same, command="plugin", clock=clock)
    assert await credentials.authorization() == "Bearer dead"
    assert await credentials.refresh_after_unauthorized("Bearer dead") is False


async def test_a_failed_refresh_keeps_a_token_that_is_still_valid_then_fails() -> None:
    clock = FakeClock(START)
    plugin = Plugin(clock, lifetime=20)
    credentials = exec_credentials(plugin)
    await credentials.authorization()
    plugin.fail = True
    clock.advance(16)  # past the refresh point, before the expiry
    assert await credentials.authorization() == "Bearer token-1"
    assert plugin.runs == 2
    # For a second after a failed run, requests use the token without running it again.
    clock.advance(0.9)
    assert await credentials.authorization() == "Bearer token-1"
    assert plugin.runs == 2
    clock.advance(0.1)
    assert await credentials.authorization() == "Bearer token-1"
    assert plugin.runs == 3
    clock.advance(3)  # expired
    with pytest.raises(CredentialsError, match="exec plugin plugin: exec: process returned 1"):
        await credentials.authorization()
    assert issubclass(CredentialsError, aiohttp.ClientError)  # a failed round trip to callers
    plugin.fail = False
    assert await credentials.authorization() == "Bearer token-5"


async def test_a_plugin_answer_without_a_token_is_an_error() -> None:
    async def certificate() -> Mapping[str, Any]:
        return {"clientCertificateData": "...", "clientKeyData": "..."}

    credentials = ExecCredentials(certificate, command="plugin", clock=FakeClock(START))
    with pytest.raises(CredentialsError, match="returned no token"):
        await credentials.authorization()


async def test_a_token_file_is_read_again_every_minute_and_after_a_401(tmp_path: Path) -> None:
    clock = FakeClock(START)
    path = tmp_path / "token"
    path.write_text("one\n")
    credentials = TokenFile(str(path), clock=clock)
    assert await credentials.authorization() == "Bearer one"
    path.write_text("two")
    clock.advance(59.9)
    assert await credentials.authorization() == "Bearer one"
    clock.advance(0.1)
    assert await credentials.authorization() == "Bearer two"
    path.write_text("three")
    assert await credentials.refresh_after_unauthorized("Bearer two") is True
    assert await credentials.authorization() == "Bearer three"
    assert await credentials.refresh_after_unauthorized("Bearer three") is False


async def test_a_token_file_that_cannot_be_read_keeps_the_last_token(tmp_path: Path) -> None:
    clock = FakeClock(START)
    path = tmp_path / "token"
    path.write_text("one")
    credentials = TokenFile(str(path), clock=clock)
    path.unlink()
    clock.advance(60)
    assert await credentials.authorization() == "Bearer one"
    path.write_text("")
    clock.advance(60)
    assert await credentials.authorization() == "Bearer one"
    with pytest.raises(CredentialsError):
        TokenFile(str(tmp_path / "missing"), clock=clock)
    fallback = TokenFile(str(tmp_path / "missing"), clock=clock, fallback="Bearer inline")
    assert await fallback.authorization() == "Bearer inline"


async def test_an_auth_provider_is_asked_every_10_seconds_and_after_a_401() -> None:
    clock = FakeClock(START)
    answers = ["Bearer b", "Bearer c", "Bearer c"]
    asked: list[str] = []

    async def check() -> str:
        asked.append(answers[len(asked)])
        return asked[-1]

    credentials = AuthProviderCredentials(check, provider="oidc", initial="Bearer a", clock=clock)
    assert await credentials.authorization() == "Bearer a"
    clock.advance(9.9)
    assert await credentials.authorization() == "Bearer a"
    clock.advance(0.1)
    assert await credentials.authorization() == "Bearer b"
    assert await credentials.refresh_after_unauthorized("Bearer b") is True
    assert await credentials.refresh_after_unauthorized("Bearer c") is False
    assert len(asked) == 3


# -- load_config --------------------------------------------------------------------------


PLUGIN = """#!{python}
import json, os
log = os.environ["PLUGIN_LOG"]
with open(log, "a") as f:
    f.write("run\\n")
runs = len(open(log).read().splitlines())
print(json.dumps({{
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {{"token": f"exec-{{runs}}", "expirationTimestamp": os.environ["PLUGIN_EXPIRES"]}},
}}))
"""


def kubeconfig(tmp_path: Path, user: dict[str, Any], *, server: str = "http://127.0.0.1:1") -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "main",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return path


def exec_plugin(tmp_path: Path, *, expires: dt.datetime) -> tuple[dict[str, Any], Path]:
    script = tmp_path / "plugin"
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "runs"
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(script),
            "env": [
                {"name": "PLUGIN_LOG", "value": str(log)},
                {"name": "PLUGIN_EXPIRES", "value": rfc3339(expires)},
            ],
        }
    }
    return user, log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines())


async def test_load_config_runs_an_exec_plugin_again_before_its_expiry(tmp_path: Path) -> None:
    clock = FakeClock(START)
    user, log = exec_plugin(tmp_path, expires=START + dt.timedelta(seconds=60))
    config = await load_config(str(kubeconfig(tmp_path, user)), environ={}, clock=clock)
    assert isinstance(config.credentials, ExecCredentials)
    assert await config.credentials.authorization() == "Bearer exec-1"
    assert runs(log) == 1  # the load's run is reused
    clock.advance(49.9)
    assert await config.credentials.authorization() == "Bearer exec-1"
    clock.advance(0.1)  # 10 s before the expiry
    assert await config.credentials.authorization() == "Bearer exec-2"
    assert runs(log) == 2


async def test_load_config_reads_a_relative_token_file_every_minute(tmp_path: Path) -> None:
    clock = FakeClock(START)
    (tmp_path / "token").write_text("first")
    config = await load_config(
        str(kubeconfig(tmp_path, {"tokenFile": "token"})), environ={}, clock=clock
    )
    assert isinstance(config.credentials, TokenFile)
    assert config.credentials.path == str(tmp_path / "token")
    (tmp_path / "token").write_text("second")
    clock.advance(60)
    assert await config.credentials.authorization() == "Bearer second"


async def test_load_config_reads_the_in_cluster_token_every_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubernetes_asyncio.config import incluster_config

    from omed_devcluster.certs import CertificateAuthority

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("projected-1")
    ca.write_bytes(CertificateAuthority.create("test-ca").cert_pem)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    clock = FakeClock(START)
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = await load_config(environ=environ, clock=clock)
    assert config.host == "https://10.96.0.1:443"
    assert isinstance(config.credentials, TokenFile)
    assert await config.credentials.authorization() == "Bearer projected-1"
    token.write_text("projected-2")  # kubelet rotated it
    clock.advance(60)
    assert await config.credentials.authorization() == "Bearer projected-2"


async def test_load_config_keeps_an_inline_token_as_it_is(tmp_path: Path) -> None:
    config = await load_config(str(kubeconfig(tmp_path, {"token": "t"})), environ={})
    assert config.credentials == StaticCredentials("Bearer t")


def jwt(expires: float, subject: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return ".".join([part({"alg": "none"}), part({"exp": int(expires), "sub": subject}), "sig"])


@pytest.fixture
async def identity_provider() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """An OpenID provider that refreshes tokens: its URL, and the refresh requests it got."""
    refreshed: list[dict[str, str]] = []

    async def discovery(request: web.Request) -> web.Response:
        base = f"http://{request.host}"
        return web.json_response({"issuer": base, "token_endpoint": f"{base}/token"})

    async def token(request: web.Request) -> web.Response:
        form = dict(await request.post())
        refreshed.append({k: str(v) for k, v in form.items()})
        n = len(refreshed)
        return web.json_response(
            {"id_token": jwt(time.time() + 3600, f"new-{n}"), "refresh_token": f"refresh-{n}"}
        )

    app = web.Application()
    app.router.add_get("/.well-known/openid-configuration", discovery)
    app.router.add_post("/token", token)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", refreshed
    finally:
        await runner.cleanup()


@pytest.mark.filterwarnings("ignore::DeprecationWarning:kubernetes_asyncio.config.openid")
async def test_load_config_has_kubernetes_asyncio_refresh_an_expiring_oidc_token(
    tmp_path: Path,
    identity_provider: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubernetes_asyncio.config import kube_config

    issuer, refreshed = identity_provider
    first = jwt(time.time() + 3600, "first")
    user = {
        "auth-provider": {
            "name": "oidc",
            "config": {
                "client-id": "omed",
                "client-secret": "s",
                "idp-issuer-url": issuer,
                "id-token": first,
                "refresh-token": "refresh-0",
            },
        }
    }
    clock = FakeClock(START)
    config = await load_config(str(kubeconfig(tmp_path, user)), environ={}, clock=clock)
    assert isinstance(config.credentials, AuthProviderCredentials)
    assert await config.credentials.authorization() == f"Bearer {first}"
    assert refreshed == []
    # The library judges expiry on the wall clock, 5 minutes early: a skew of two hours
    # makes the hour-long token due, as if 55 minutes had passed.
    monkeypatch.setattr(kube_config, "EXPIRY_SKEW_PREVENTION_DELAY", dt.timedelta(hours=2))
    clock.advance(10)
    header = await config.credentials.authorization()
    assert refreshed and refreshed[0]["refresh_token"] == "refresh-0"
    assert header is not None and header != f"Bearer {first}"
    payload = header.split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sub"] == (
        f"new-{len(refreshed)}"
    )


# -- the plugin process itself ----------------------------------------------------------------

HUNG_PLUGIN = """#!{python}
import os, sys, time
open(os.environ["PLUGIN_PID"], "w").write(str(os.getpid()))
time.sleep(3600)
"""


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


async def test_a_plugin_that_never_answers_is_killed_at_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    hung = script(tmp_path, "hung", HUNG_PLUGIN)
    started = time.monotonic()
    with pytest.raises(CredentialsError, match=r"gave no answer within 0\.5s and was stopped"):
        await run_exec_plugin(
            [hung],
            env={"PLUGIN_PID": str(pid_file)},
            api_version="client.authentication.k8s.io/v1",
            timeout=0.5,
            interactive=False,
        )
    assert time.monotonic() - started < 3
    assert not alive(int(pid_file.read_text()))


async def test_a_cancelled_refresh_leaves_no_plugin_running(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    hung = script(tmp_path, "hung", HUNG_PLUGIN)
    run = asyncio.create_task(
        run_exec_plugin(
            [hung],
            env={"PLUGIN_PID": str(pid_file)},
            api_version="client.authentication.k8s.io/v1",
            interactive=False,
        )
    )
    for _ in range(500):  # the plugin has started once it wrote its pid
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.02)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not alive(int(pid_file.read_text()))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("import sys; sys.stderr.write('no network\\n'); sys.exit(3)", "exited with 3: no network"),
        ("print('hello')", "printed no JSON"),
        ('print(\'{{"kind": "ExecCredential"}}\')', "printed no ExecCredential"),
        (
            'print(\'{{"apiVersion": "v0", "kind": "ExecCredential", "status": {{}}}}\')',
            "answered apiVersion v0, not client.authentication.k8s.io/v1",
        ),
    ],
)
async def test_a_plugin_answer_that_is_no_credential_is_an_error(
    tmp_path: Path, body: str, message: str
) -> None:
    plugin = script(tmp_path, "plugin", "#!{python}\n" + body + "\n")
    with pytest.raises(CredentialsError, match=message):
        await run_exec_plugin(
            [plugin], env={}, api_version="client.authentication.k8s.io/v1", interactive=False
        )


async def test_the_plugin_is_told_what_kubernetes_asyncio_tells_it(tmp_path: Path) -> None:
    echo = script(
        tmp_path,
        "echo",
        "#!{python}\nimport json, os\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "print(json.dumps({{'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
        " 'status': {{'token': 'interactive-' + str(info['spec']['interactive']),"
        " 'extra': os.environ['EXTRA']}}}}))\n",
    )
    status = await run_exec_plugin(
        [echo], env={"EXTRA": "x"}, api_version="client.authentication.k8s.io/v1", interactive=False
    )
    assert status == {"token": "interactive-False", "extra": "x"}
