"""Credentials that expire, kept fresh as client-go keeps them.

Why: kubernetes-asyncio's kubeconfig loader reads a user's credentials once. A token from an
exec plugin (cloud IAM, Teleport, Vault), a token file that kubelet rotates, an OIDC id-token
all expire, and a manager or a ``kubectl ome wait`` that kept the first one got 401 for the
rest of its life. Each kind here gives the ``Authorization`` value for the next request and
refreshes it the way client-go does:

- :class:`ExecCredentials`: the kubeconfig's ``exec`` plugin (its command, args and env as
  kubernetes-asyncio's ``ExecProvider`` reads them; :func:`run_exec_plugin` runs it). Its
  token is kept until shortly before its ``status.expirationTimestamp``
  (:func:`refresh_margin`), then the plugin runs again; a token without an expiry is kept
  until the API server answers 401. client-go waits for the expiry itself; the margin keeps
  a request in flight, or a clock a little behind the plugin's, from carrying a dead token.
  A plugin that doesn't answer within :data:`EXEC_TIMEOUT` is killed and the refresh fails
  (client-go has no bound: a hung plugin there holds every request that waits for the
  token); one that runs interactively, on a terminal, is not bounded, as a person answers it.
- :class:`TokenFile`: a bearer token file (a kubeconfig's ``tokenFile``, the in-cluster
  ServiceAccount token) read again every 60 s, client-go's ``cachingTokenSource`` period;
  a read that fails keeps the last token (kubelet swaps the file as a whole).
- :class:`AuthProviderCredentials`: the ``oidc`` and ``gcp`` auth-providers. The library
  refreshes those itself when their token is within 5 minutes of its expiry (an OIDC
  id-token's ``exp``, GCP's ``expiry``; OIDC through the refresh-token, GCP through
  google-auth, which must be installed): it is asked again every 10 s and after a 401.
- :class:`StaticCredentials`: an inline token or basic auth; nothing to refresh.

After a 401 the client calls :meth:`Credentials.refresh_after_unauthorized` with what it
sent, and sends the request once more only when that gives different credentials: a 401
means the API server didn't act on the request, whatever its verb, and one more try with the
same credentials would get the same answer.

Invariants: one refresh at a time per credentials object, whoever asks (concurrent requests
at an expiry wait for one plugin run); a refresh that fails while the old token is still
valid keeps the old one; a refresh that fails with nothing valid left raises
:class:`CredentialsError`, an ``aiohttp.ClientError``, so callers treat it as the failed
round trip it is (as client-go's transport returns the plugin's error from ``RoundTrip``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import aiohttp

from omed.clock import Clock, RealClock, parse_rfc3339
from omed.log import kv

log = logging.getLogger("omed.kube")

TOKEN_FILE_PERIOD: Final = 60.0
"""Seconds between reads of a token file (client-go's cached file token source)."""
AUTH_PROVIDER_PERIOD: Final = 10.0
"""Seconds between asking an auth-provider whether its token needs refreshing."""
EXEC_REFRESH_MARGIN: Final = 10.0
"""The most seconds before its expiry that an exec plugin's token is replaced."""
EXEC_TIMEOUT: Final = 30.0
"""Seconds a non-interactive exec plugin may take to answer before it is killed."""
FAILED_REFRESH_PAUSE: Final = 1.0
"""Seconds a plugin that failed isn't run again while its last token is still valid (the
requests meanwhile use that token, instead of each waiting for a run that fails)."""


class CredentialsError(aiohttp.ClientError):
    """No valid credentials: the plugin, file or auth-provider failed and nothing valid is
    left. Raised from a request, as a connection error would be."""


class Credentials(Protocol):
    """What the client asks for each request's ``Authorization`` header."""

    async def authorization(self) -> str | None:
        """The header's value (``Bearer <token>``, ``Basic <...>``), refreshed when due."""
        ...

    async def refresh_after_unauthorized(self, refused: str | None) -> bool:
        """The API server answered 401 to a request sent with ``refused``: refresh, and say
        whether there are different credentials to send it again with."""
        ...


@dataclasses.dataclass(frozen=True)
class StaticCredentials:
    """An inline token or basic auth from the kubeconfig."""

    value: str

    async def authorization(self) -> str | None:
        return self.value

    async def refresh_after_unauthorized(self, refused: str | None) -> bool:
        return False


def refresh_margin(lifetime: float) -> float:
    """How long before its expiry a token that lives ``lifetime`` seconds is replaced: a
    quarter of its life, at most :data:`EXEC_REFRESH_MARGIN` (an hour's token 10 s early, a
    20 s token 5 s early)."""
    return max(0.0, min(EXEC_REFRESH_MARGIN, lifetime / 4))


@dataclasses.dataclass(frozen=True)
class _Issued:
    header: str
    expires: dt.datetime | None
    refresh_at: dt.datetime | None


class ExecCredentials:
    """Tokens from a kubeconfig ``exec`` plugin; ``run`` runs it and returns its
    ExecCredential ``status``."""

    def __init__(
        self,
        run: Callable[[], Awaitable[Mapping[str, Any]]],
        *,
        command: str,
        clock: Clock | None = None,
        initial: Mapping[str, Any] | None = None,
    ) -> None:
        self._run = run
        self._command = command
        self._clock = clock or RealClock()
        self._lock = asyncio.Lock()
        self._issued = None if initial is None else self._take(initial)
        self._pause_until = 0.0
        self.runs = 0
        """How many times the plugin ran here (the load's first run is not counted)."""

    def _take(self, status: Mapping[str, Any]) -> _Issued:
        token = status.get("token")
        if not isinstance(token, str) or not token:
            raise CredentialsError(
                f"exec plugin {self._command} returned no token (a client certificate from "
                "an exec plugin is read once, when the kubeconfig is loaded)"
            )
        expiry = status.get("expirationTimestamp")
        if not expiry:
            return _Issued(header=f"Bearer {token}", expires=None, refresh_at=None)
        try:
            expires = (
                expiry.astimezone(dt.UTC)
                if isinstance(expiry, dt.datetime)
                else parse_rfc3339(str(expiry))
            )
        except ValueError:
            raise CredentialsError(
                f"exec plugin {self._command} returned expirationTimestamp {expiry!r}, not a time"
            ) from None
        lifetime = (expires - self._clock.now()).total_seconds()
        refresh_at = expires - dt.timedelta(seconds=refresh_margin(lifetime))
        return _Issued(header=f"Bearer {token}", expires=expires, refresh_at=refresh_at)

    def _fresh(self, issued: _Issued | None) -> bool:
        return issued is not None and (
            issued.refresh_at is None or self._clock.now() < issued.refresh_at
        )

    def _valid(self, issued: _Issued | None) -> bool:
        return issued is not None and (issued.expires is None or self._clock.now() < issued.expires)

    async def _refresh(self) -> _Issued:
        self.runs += 1
        try:
            status = await self._run()
        except CredentialsError:
            raise
        except Exception as exc:
            raise CredentialsError(f"exec plugin {self._command}: {exc}") from exc
        issued = self._take(status)
        self._issued = issued
        log.info(
            "Refreshed credentials",
            extra=kv(
                source="exec",
                command=self._command,
                expires=issued.expires.strftime("%Y-%m-%dT%H:%M:%SZ") if issued.expires else "",
            ),
        )
        return issued

    def _usable(self) -> str | None:
        """The current header when it may be sent without running the plugin."""
        issued = self._issued
        if issued is None:
            return None
        if self._fresh(issued):
            return issued.header
        if self._clock.monotonic() < self._pause_until and self._valid(issued):
            return issued.header
        return None

    async def authorization(self) -> str | None:
        usable = self._usable()
        if usable is not None:
            return usable
        async with self._lock:
            usable = self._usable()
            if usable is not None:
                return usable
            current = self._issued
            try:
                return (await self._refresh()).header
            except CredentialsError as exc:
                if current is None or not self._valid(current):
                    raise
                self._pause_until = self._clock.monotonic() + FAILED_REFRESH_PAUSE
                log.warning(
                    "Could not refresh credentials; using the current ones until they expire",
                    extra=kv(source="exec", err=str(exc)),
                )
                return current.header

    async def refresh_after_unauthorized(self, refused: str | None) -> bool:
        async with self._lock:
            current = self._issued
            if current is not None and current.header != refused:
                return True  # another request refreshed them meanwhile
            return (await self._refresh()).header != refused


class TokenFile:
    """A bearer token read from ``path`` again every :data:`TOKEN_FILE_PERIOD` seconds and
    after a 401; ``fallback`` (a kubeconfig's inline token beside its tokenFile) when the
    file can't be read, as client-go takes it."""

    def __init__(
        self,
        path: str,
        *,
        clock: Clock | None = None,
        period: float = TOKEN_FILE_PERIOD,
        fallback: str | None = None,
    ) -> None:
        self.path = path
        self._clock = clock or RealClock()
        self._period = period
        self._fallback = fallback
        self._header: str | None = None
        self._read_at = self._clock.monotonic()
        self._read()
        if self._header is None:
            raise CredentialsError(f"token file {path}: cannot be read, and no token to use")

    def _read(self) -> None:
        self._read_at = self._clock.monotonic()
        try:
            with open(self.path, encoding="utf-8") as file:
                token = file.read().strip()
            if not token:
                raise ValueError("the file is empty")
        except (OSError, ValueError) as exc:
            kept = self._header or self._fallback
            log.warning(
                "Could not read the token file; keeping the last token",
                extra=kv(path=self.path, err=str(exc)),
            )
            self._header = kept
            return
        header = f"Bearer {token}"
        if self._header is not None and header != self._header:
            log.info("Refreshed credentials", extra=kv(source="tokenFile", path=self.path))
        self._header = header

    async def authorization(self) -> str | None:
        if self._clock.monotonic() - self._read_at >= self._period:
            self._read()
        return self._header

    async def refresh_after_unauthorized(self, refused: str | None) -> bool:
        self._read()
        return self._header != refused


class AuthProviderCredentials:
    """An ``oidc`` or ``gcp`` auth-provider: ``check`` asks kubernetes-asyncio's loader for the
    token, which it refreshes when it is close to its expiry."""

    def __init__(
        self,
        check: Callable[[], Awaitable[str]],
        *,
        provider: str,
        initial: str,
        clock: Clock | None = None,
        period: float = AUTH_PROVIDER_PERIOD,
    ) -> None:
        self._check = check
        self._provider = provider
        self._clock = clock or RealClock()
        self._period = period
        self._header = initial
        self._checked_at = self._clock.monotonic()
        self._lock = asyncio.Lock()

    async def _refresh(self) -> str:
        self._checked_at = self._clock.monotonic()
        try:
            header = await self._check()
        except Exception as exc:
            raise CredentialsError(f"auth-provider {self._provider}: {exc}") from exc
        if header != self._header:
            log.info("Refreshed credentials", extra=kv(source=self._provider))
        self._header = header
        return header

    async def authorization(self) -> str | None:
        if self._clock.monotonic() - self._checked_at < self._period:
            return self._header
        async with self._lock:
            if self._clock.monotonic() - self._checked_at < self._period:
                return self._header
            try:
                return await self._refresh()
            except CredentialsError as exc:
                log.warning(
                    "Could not refresh credentials; using the current ones",
                    extra=kv(source=self._provider, err=str(exc)),
                )
                return self._header

    async def refresh_after_unauthorized(self, refused: str | None) -> bool:
        async with self._lock:
            if self._header != refused:
                return True
            return await self._refresh() != refused


def from_kubeconfig(loader: Any, user: Any, *, clock: Clock | None = None) -> Credentials | None:
    """The credentials of a loaded kubeconfig user, in the loader's order (auth-provider,
    exec, token file, token, basic auth); ``None`` when there is no token (a client
    certificate, or nothing). ``loader`` is the kubernetes-asyncio ``KubeConfigLoader`` that
    loaded them (its first exec plugin run is reused, not repeated), ``user`` the ``user``
    node of the context's user (``None`` when the context names none)."""
    from omed.kube.kubeconfig_loaders import Configuration, ExecProvider

    token: str | None = getattr(loader, "token", None)
    if user is None:
        return None
    if loader.provider in ("gcp", "oidc") and token:

        async def check() -> str:
            # The loader's public way in: it refreshes the provider's token if due and sets
            # it on the configuration it is given (a scratch one; nothing else changes).
            scratch = Configuration()
            await loader.load_and_set(scratch)
            return str(scratch.api_key["BearerToken"])

        return AuthProviderCredentials(
            check, provider=str(loader.provider), initial=token, clock=clock
        )
    if "exec" in user:
        if not token:
            return None  # a client certificate, in the TLS context
        exec_config = user["exec"]
        provider = ExecProvider(exec_config)

        async def run() -> Mapping[str, Any]:
            return await run_exec_plugin(
                provider.args, env=provider.env, api_version=str(provider.api_version)
            )

        expiry = getattr(loader, "exec_plugin_expiry", None)
        initial = {"token": token.removeprefix("Bearer "), "expirationTimestamp": expiry}
        return ExecCredentials(
            run, command=str(exec_config["command"]), clock=clock, initial=initial
        )
    if "tokenFile" in user:
        path = os.path.expanduser(str(user["tokenFile"]))
        if not os.path.isabs(path) and getattr(user, "path", None):
            path = os.path.join(os.path.dirname(os.path.abspath(user.path)), path)
        inline = user.safe_get("token")
        return TokenFile(path, clock=clock, fallback=f"Bearer {inline}" if inline else None)
    return StaticCredentials(token) if token else None


__all__ = [
    "AuthProviderCredentials",
    "Credentials",
    "CredentialsError",
    "ExecCredentials",
    "StaticCredentials",
    "TokenFile",
    "from_kubeconfig",
    "refresh_margin",
]


async def run_exec_plugin(
    args: list[str],
    *,
    env: Mapping[str, str],
    api_version: str,
    timeout: float = EXEC_TIMEOUT,
    interactive: bool | None = None,
) -> Mapping[str, Any]:
    """The ``status`` of the ExecCredential the plugin ``args`` prints, checked as
    kubernetes-asyncio's ``ExecProvider.run`` checks it (exit code, JSON, apiVersion, the
    keys), with ``KUBERNETES_EXEC_INFO`` set the same way.

    Invariant: no plugin process outlives the call. A non-interactive run that takes longer
    than ``timeout`` seconds, or whose caller is cancelled, is killed and reaped; the timeout
    raises :class:`CredentialsError`. ``interactive`` defaults to whether stdout is a
    terminal (the plugin may prompt there, and the run is then not bounded)."""
    if interactive is None:
        interactive = sys.stdout.isatty()
    info = {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": interactive},
    }
    proc = await asyncio.create_subprocess_exec(
        *args,
        env={**env, "KUBERNETES_EXEC_INFO": json.dumps(info)},
        stdin=None if interactive else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(
            proc.communicate(), timeout=None if interactive else timeout
        )
    except TimeoutError:
        raise CredentialsError(
            f"exec plugin {args[0]} gave no answer within {timeout:g}s and was stopped"
        ) from None
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
    if proc.returncode != 0:
        detail = stderr.decode(errors="replace").strip()
        raise CredentialsError(
            f"exec plugin {args[0]} exited with {proc.returncode}"
            + (f": {detail}" if detail else "")
        )
    try:
        data = json.loads(stdout)
    except ValueError as exc:
        raise CredentialsError(f"exec plugin {args[0]} printed no JSON: {exc}") from None
    if not isinstance(data, Mapping) or any(
        k not in data for k in ("apiVersion", "kind", "status")
    ):
        raise CredentialsError(
            f"exec plugin {args[0]} printed no ExecCredential (apiVersion, kind and status)"
        )
    if data["apiVersion"] != api_version:
        raise CredentialsError(
            f"exec plugin {args[0]} answered apiVersion {data['apiVersion']}, not {api_version}"
        )
    status = data["status"]
    if not isinstance(status, Mapping):
        raise CredentialsError(f"exec plugin {args[0]} printed a status that is not an object")
    return status
