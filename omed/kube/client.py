"""The one way omed talks to the API server.

kubernetes-asyncio loads the kubeconfig or the in-cluster config and its auth (client
certificates, bearer tokens, exec plugins); tokens that expire are refreshed by
:mod:`omed.kube.credentials`. Requests then go through one aiohttp session per client, with
bodies decoded by orjson into plain dicts. Model objects are never built: the caches and
controllers read JSON-shaped dicts, which is several times cheaper.

Invariants:
- every request passes the client's :class:`~omed.kube.ratelimit.TokenBucket`; a request held
  back more than a second logs ``Waited before sending request`` with the delay, the verb and
  the URL, as client-go does, and the wait is observed in
  ``rest_client_rate_limiter_duration_seconds``;
- every answer is counted in ``rest_client_requests_total{code,method,host}``;
- an error status becomes a typed :mod:`omed.kube.errors` exception;
- a request answered 401 is sent once more when the credentials, refreshed, have changed
  (:meth:`~omed.kube.credentials.Credentials.refresh_after_unauthorized`), never twice;
- a request has one deadline for all its tries (:data:`DEFAULT_DEADLINE`): no retry wait,
  and no try, runs past it, and the waits are taken on the client's injected clock.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import logging
import os
import random
import re
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote, urlencode, urlsplit

import aiohttp
import orjson
from prometheus_client import Counter, Histogram

from omed.clock import Clock, RealClock
from omed.kube import credentials as creds
from omed.kube.credentials import Credentials
from omed.kube.errors import (
    MAX_RETRY_AFTER,
    ApiError,
    Conflict,
    error_from_response,
    parse_retry_after,
)
from omed.kube.ratelimit import TokenBucket
from omed.log import kv
from omed.metrics import REGISTRY

log = logging.getLogger("omed.kube")

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
"""The variables :meth:`omed.kube.proxy.ProxyEnvironment.from_environ` takes a proxy from:
with none of them set and no ``proxy-url``, every request goes direct, whatever ``NO_PROXY``
says, and :func:`load_config` imports no proxy rules (a command that reads a few objects
then pays for no module it doesn't use)."""

LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
"""client-go's buckets of the rate limiter's wait and of a request's latency, in seconds."""

REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
    registry=REGISTRY,
)
LIMITER_WAIT = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
REQUEST_LATENCY = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)

WAIT_LOG_THRESHOLD = 1.0
MAX_RETRIES = 10
"""How many times a request answered "wait and retry" is sent again (client-go's default)."""
DEFAULT_DEADLINE = 60.0
"""How long, in seconds, one request may take with all its tries and waits, unless the
client or the call gives a deadline (and at least the per-try timeout). client-go's
request deadline is its context's (``rest.Config.Timeout``, none by default)."""

_WHOLE_SECONDS = re.compile(r"[+-]?[0-9]+")
_INT64_MAX = 2**63 - 1


def retry_after_seconds(status: int, retry_after: str | None) -> float | None:
    """How long to wait before sending a request again, or ``None`` to fail it now.

    Whether to wait is client-go's ``checkWait``: an answer of 429 or any 5xx whose
    ``Retry-After`` is whole seconds (``strconv.Atoi``: ASCII digits, a sign, within
    int64) means the API server didn't act on the request (API Priority and Fairness
    rejecting it, a resource's storage still initializing after a CRD is installed, an
    apiserver shutting down), so it may be sent again, whatever its verb; an HTTP date, a
    fraction or no header fails it now. How long is the informers' rule,
    :func:`~omed.kube.errors.parse_retry_after`: at most :data:`MAX_RETRY_AFTER` (30 s;
    client-go waits any value, until its context ends), and a negative value counts as
    absent (client-go sends again at once).
    """
    if retry_after is None or (status != 429 and status < 500):
        return None
    text = retry_after.strip()
    if not _WHOLE_SECONDS.fullmatch(text) or int(text) > _INT64_MAX:
        return None
    return parse_retry_after(text)


JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """Where the API server is and how to authenticate; built by :func:`load_config`."""

    host: str
    ssl_context: ssl.SSLContext | bool
    credentials: Credentials | None = None
    """The bearer token or basic auth of each request, refreshed as it expires; ``None``
    for a client certificate alone (or no auth). Shared by :meth:`impersonating` copies."""
    impersonate_user: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    proxy: str | None = None
    """The proxy requests go through (:mod:`omed.kube.proxy`), or ``None`` for direct."""

    def impersonating(self, user: str, groups: tuple[str, ...] = ()) -> ClusterConfig:
        return dataclasses.replace(self, impersonate_user=user, impersonate_groups=groups)


def tls_context(
    *, verify: bool, cafile: str | None, cert_file: str | None, key_file: str | None
) -> ssl.SSLContext:
    """The TLS context of the API server's connections, as the kubeconfig's cluster and user
    say: the server checked against ``cafile`` (the system's CAs when none), or not checked at
    all under ``insecure-skip-tls-verify``; the user's client certificate presented either
    way, as kubectl presents it (an insecure cluster still authenticates its user).

    Invariant: never aiohttp's own default contexts, so a connection's certificates are only
    the kubeconfig's."""
    if verify:
        context = ssl.create_default_context(cafile=cafile)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context


async def load_config(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Clock | None = None,
) -> ClusterConfig:
    """Load a kubeconfig file (``$KUBECONFIG`` or ``~/.kube/config``) or the in-cluster config,
    and the proxy to reach its server through (the cluster's ``proxy-url``, else Go's
    ``HTTPS_PROXY``/``NO_PROXY`` rules over ``environ``, by default ``os.environ``).

    Credentials that expire stay fresh (:mod:`omed.kube.credentials`, timed by ``clock``):
    an exec plugin runs again shortly before its token's expiry and after a 401, a token file
    (``tokenFile``, the in-cluster ServiceAccount token) is read again every minute, an
    oidc or gcp auth-provider's token is refreshed by kubernetes-asyncio when it is due.

    Raises :class:`FileNotFoundError` for a named kubeconfig that doesn't exist (the library
    would read it as empty and complain about missing contexts), and
    :class:`~omed.kube.proxy.ProxyConfigError` for a proxy setting that can't be used.
    """
    # kubernetes-asyncio's loaders without its generated client (seconds of imports)
    from omed.kube.kubeconfig_loaders import (
        Configuration,
        KubeConfigLoader,
        KubeConfigMerger,
        incluster_config,
    )

    env = os.environ if environ is None else environ
    configuration = Configuration()
    path = kubeconfig or env.get("KUBECONFIG")
    credentials: Credentials | None
    if path or not env.get("KUBERNETES_SERVICE_HOST"):
        _check_kubeconfig_exists(path, named=kubeconfig is not None)
        # What kubernetes-asyncio's load_kube_config does, keeping the merged config to find
        # the context's user in (its credentials are refreshed from there).
        merged = KubeConfigMerger(path or "~/.kube/config")
        loader = KubeConfigLoader(
            config_dict=merged.config,
            active_context=context,
            config_base_path=None,
            temp_file_path=_temp_dir(),
        )
        await loader.load_and_set(configuration)
        credentials = creds.from_kubeconfig(loader, _context_user(merged, loader), clock=clock)
    else:
        token_file = incluster_config.SERVICE_TOKEN_FILENAME
        incluster_config.InClusterConfigLoader(
            token_filename=token_file,
            cert_filename=incluster_config.SERVICE_CERT_FILENAME,
            try_refresh_token=False,  # the token file is read again below, as client-go does
            environ=dict(env),
        ).load_and_set(configuration)
        credentials = creds.TokenFile(token_file, clock=clock)
    host = str(configuration.host or "").rstrip("/")
    proxy: str | None = None
    if configuration.proxy:
        from omed.kube.proxy import parse_proxy_url

        proxy = parse_proxy_url(str(configuration.proxy), source="the cluster's proxy-url")
    elif any(env.get(name) for name in PROXY_VARIABLES):
        from omed.kube.proxy import ProxyEnvironment

        proxy = ProxyEnvironment.from_environ(env).proxy_for(host)
    ssl_context = tls_context(
        verify=bool(configuration.verify_ssl),
        cafile=configuration.ssl_ca_cert,
        cert_file=configuration.cert_file,
        key_file=configuration.key_file,
    )
    return ClusterConfig(host=host, ssl_context=ssl_context, credentials=credentials, proxy=proxy)


def _context_user(merged: Any, loader: Any) -> Any:
    """The ``user`` node of the loaded context's user (it knows the file it came from, for a
    relative ``tokenFile``), or ``None``."""
    name = ((loader.current_context or {}).get("context") or {}).get("user")
    if not name or merged.config is None or not merged.config.safe_get("users"):
        return None
    entry = merged.config["users"].get_with_name(name, safe=True)
    if entry is None or entry.safe_get("user") is None:
        return None
    return entry["user"]


def _check_kubeconfig_exists(path: str | None, *, named: bool) -> None:
    """A named kubeconfig must exist; of a ``$KUBECONFIG`` list (``a:b``), one must."""
    if path is None:
        path = os.path.expanduser("~/.kube/config")
        named = True
    files = [path] if named else [p for p in path.split(os.pathsep) if p]
    if not any(os.path.exists(os.path.expanduser(f)) for f in files):
        what = "kubeconfig" if named else "$KUBECONFIG"
        raise FileNotFoundError(f"{what} {path}: no such file")


@functools.cache
def _temp_directory() -> tempfile.TemporaryDirectory[str]:
    """Where the kubeconfig loader writes inline certificate data: one directory per
    process, removed when the process exits (the loader may write there again when an exec
    plugin refreshes its credentials, so it lives as long as the process)."""
    return tempfile.TemporaryDirectory(prefix="omed-kubeconfig-")


def _temp_dir() -> str:
    return _temp_directory().name


def _proxy_and_headers(proxy: str | None) -> tuple[str | None, dict[str, str] | None]:
    """The proxy URL without its user info, and that user info as a Proxy-Authorization
    header (Basic, as Go sends it)."""
    if proxy is None:
        return None, None
    parts = urlsplit(proxy)
    if parts.username is None and parts.password is None:
        return proxy, None
    credentials = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    header = "Basic " + base64.b64encode(credentials.encode()).decode("ascii")
    netloc = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=netloc).geturl(), {"Proxy-Authorization": header}


@dataclasses.dataclass(frozen=True)
class Resource:
    """A REST resource: ``/api/v1/...`` for the core group, ``/apis/<group>/<version>``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


class CheckedBody(aiohttp.BytesPayload):
    """A request body that calls ``check()`` the instant before its bytes go to the socket.

    Why: aiohttp writes a request's body, and with it the request's headers (it holds them
    back to send both in one write), from a task of its own that runs a loop iteration or
    more after the request was handed over. A loop that stalls in between (stopped, starved,
    a long pause) sends the request when it resumes, however long after any earlier check.
    Here the check runs synchronously inside that last write, with no await between it and
    the bytes reaching the transport. When it raises, nothing of the request is written:
    the exception is kept in :attr:`refused`, aiohttp fails the request with a connection
    error, and :meth:`KubeClient._send` raises the kept exception in its place.
    """

    def __init__(self, value: bytes, *, check: Callable[[], None], content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._check = check
        self.refused: Exception | None = None

    def _passes(self) -> None:
        try:
            self._check()
        except Exception as refused:
            self.refused = refused
            raise

    async def write(self, writer: Any) -> None:
        self._passes()
        await super().write(writer)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        self._passes()
        await super().write_with_length(writer, content_length)


class KubeClient:
    """An API client with one rate limiter, one connection pool and typed errors.

    ``write_check``, when given, is called synchronously right before the bytes of each
    request with a body reach the socket (:class:`CheckedBody`); if it raises, the request
    is not sent and the call raises that exception.
    """

    def __init__(
        self,
        config: ClusterConfig,
        *,
        qps: float = 20.0,
        burst: int = 30,
        clock: Clock | None = None,
        user_agent: str = "omed",
        timeout: float = 30.0,
        max_retries: int = MAX_RETRIES,
        deadline: float | None = None,
        write_check: Callable[[], None] | None = None,
    ) -> None:
        """``timeout`` bounds each try; ``deadline`` a request with all its tries and waits
        (by default :data:`DEFAULT_DEADLINE`, or the request's per-try timeout if longer)."""
        self.config = config
        self._max_retries = max_retries
        self._clock: Clock = clock or RealClock()
        self.limiter = TokenBucket(qps=qps, burst=burst, clock=self._clock)
        self._host_label = urlsplit(config.host).netloc
        self._user_agent = user_agent
        self._timeout = timeout
        self._deadline = _positive_deadline(deadline)
        self._session: aiohttp.ClientSession | None = None
        self._proxy, self._proxy_headers = _proxy_and_headers(config.proxy)
        self._write_check = write_check

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.config.ssl_context, limit=100)
            self._session = aiohttp.ClientSession(connector=connector, proxy=self._proxy)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _headers(self, content_type: str | None) -> list[tuple[str, str]]:
        headers = [("Accept", JSON), ("User-Agent", self._user_agent)]
        if content_type:
            headers.append(("Content-Type", content_type))
        if self.config.credentials is not None:
            token = await self.config.credentials.authorization()
            if token:
                headers.append(("Authorization", token if " " in token else f"Bearer {token}"))
        if self.config.impersonate_user:
            headers.append(("Impersonate-User", self.config.impersonate_user))
        headers.extend(("Impersonate-Group", g) for g in self.config.impersonate_groups)
        return headers

    async def _refreshed(self, headers: list[tuple[str, str]], method: str, url: str) -> bool:
        """After a 401 to a request sent with ``headers``: whether the credentials, refreshed,
        differ from those it carried (then it may be sent once more)."""
        if self.config.credentials is None:
            return False
        sent = next((value for name, value in headers if name == "Authorization"), None)
        if not await self.config.credentials.refresh_after_unauthorized(sent):
            return False
        log.info(
            "Got 401 Unauthorized; sending the request again with refreshed credentials",
            extra=kv(verb=method, URL=url),
        )
        return True

    async def _throttle(self, method: str, url: str, *, within: float | None = None) -> float:
        """Wait for the rate limiter; return the wait. When the wait would take ``within``
        seconds or more, return it at once, without waiting (the token stays taken)."""
        delay = self.limiter.reserve()
        if within is not None and delay >= within:
            return delay
        if delay > 0:
            await self._clock.sleep(delay)
        LIMITER_WAIT.labels(method, self._host_label).observe(delay)
        if delay > WAIT_LOG_THRESHOLD:
            log.info(
                "Waited before sending request",
                extra=kv(delay=f"{delay:.3f}s", verb=method, URL=url),
            )
        return delay

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        url = self.config.host + path
        if params:
            clean = {
                ("continue" if k == "_continue" else k): _param(v)
                for k, v in params.items()
                if v is not None
            }
            if clean:
                url += "?" + urlencode(clean)
        return url

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        deadline: float | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON answer or raise a typed ApiError.

        An answer that asks to wait and retry (:func:`retry_after_seconds`) is waited out and
        the request sent again, through the rate limiter, up to ``max_retries`` times. A 401
        is sent again once, when refreshed credentials differ from those it carried.

        All of it within one deadline, ``deadline`` seconds (by default the client's), from
        when the first try leaves the rate limiter (as client-go, a throttled client doesn't
        time out before it sends anything): each try is given at most the time left
        (``timeout`` bounds each try), and a retry whose wait, Retry-After's or the
        limiter's, would end past the deadline is not made. The request then fails with the
        last answer's typed error, its message naming the deadline; with a
        :class:`TimeoutError` naming it when the deadline cut the first try short."""
        url = self._url(path, params)
        data = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        per_try = timeout or self._timeout
        budget = self._budget(per_try, _positive_deadline(deadline))
        clock = self._clock
        await self._throttle(method, url)
        started = clock.monotonic()
        ends = started + budget
        tries = retries = 0
        last: ApiError | None = None
        reauthenticated = False
        while True:
            if last is not None:
                # A try after the first: its wait in the limiter is inside the deadline.
                within = ends - clock.monotonic()
                held = 0.0 if within <= 0 else await self._throttle(method, url, within=within)
                if held >= within:
                    why = (
                        f"the rate limiter would hold the next try {held:.1f}s"
                        if held > 0
                        else "no time left for another try"
                    )
                    raise _final(
                        last,
                        f"{self._spent(method, url, tries, started)}; {why}, "
                        f"past the request's {budget:g}s deadline",
                    )
            left = ends - clock.monotonic()
            tries += 1
            try_timeout = min(per_try, left)
            try:
                status, decoded, retry_after, sent = await self._send(
                    method, url, data=data, content_type=content_type, timeout=try_timeout
                )
            except TimeoutError as err:
                if try_timeout >= per_try:
                    raise  # the try's own timeout, not the deadline
                if last is None:
                    raise TimeoutError(
                        f"{method} {url}: no answer within the request's {budget:g}s deadline"
                    ) from err
                detail = f"{method} {url}: no answer to try {tries} within the request's "
                raise _final(last, f"{detail}{budget:g}s deadline") from err
            if status < 400:
                return decoded
            last = error_from_response(status, decoded, retry_after=retry_after)
            if status == 401 and not reauthenticated:
                reauthenticated = True
                if await self._refreshed(sent, method, url):
                    continue
            wait = retry_after_seconds(status, retry_after)
            if wait is None or retries >= self._max_retries:
                raise last
            if wait >= ends - clock.monotonic():
                assert retry_after is not None
                asked = f"Retry-After: {retry_after.strip()} waits {wait:g}s"
                raise _final(
                    last,
                    f"{self._spent(method, url, tries, started)}; {asked}, "
                    f"past the request's {budget:g}s deadline",
                )
            retries += 1
            log.debug(
                "Got a Retry-After response",
                extra=kv(code=status, delay=f"{wait:g}s", attempt=retries, verb=method, URL=url),
            )
            if wait > 0:
                await clock.sleep(wait)

    def _budget(self, per_try: float, deadline: float | None) -> float:
        """The request's deadline: the call's, else the client's, else the default or the
        per-try timeout, whichever is longer (a caller's long per-try timeout isn't cut)."""
        if deadline is not None:
            return deadline
        if self._deadline is not None:
            return self._deadline
        return max(DEFAULT_DEADLINE, per_try)

    def _spent(self, method: str, url: str, tries: int, started: float) -> str:
        spent = self._clock.monotonic() - started
        return f"{method} {url}: {tries} {'try' if tries == 1 else 'tries'} in {spent:.1f}s"

    async def _send(
        self,
        method: str,
        url: str,
        *,
        data: bytes | None,
        content_type: str,
        timeout: float,
    ) -> tuple[int, Any, str | None, list[tuple[str, str]]]:
        """One try, past the rate limiter: the status, the decoded body, the Retry-After
        header and the headers sent."""
        all_headers = await self._headers(content_type if data is not None else None)
        body: bytes | CheckedBody | None = data
        if data is not None and self._write_check is not None:
            body = CheckedBody(data, check=self._write_check, content_type=content_type)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with self._http().request(
                method,
                url,
                data=body,
                headers=all_headers,
                proxy_headers=self._proxy_headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError):
            if isinstance(body, CheckedBody) and body.refused is not None:
                raise body.refused from None  # never sent: no answer to count
            REQUESTS.labels("<error>", method, self._host_label).inc()
            raise
        REQUESTS.labels(str(status), method, self._host_label).inc()
        REQUEST_LATENCY.labels(method, self._host_label).observe(loop.time() - started)
        decoded: Any
        try:
            decoded = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            decoded = raw
        return status, decoded, retry_after, all_headers

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a streaming GET (a watch) and yield an iterator over its lines. An opening
        answered 401 is tried once more when refreshed credentials differ."""
        url = self._url(path, params)
        client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=10)
        reauthenticated = False
        while True:
            await self._throttle("GET", url)
            headers = await self._headers(None)
            async with self._http().get(
                url, headers=headers, proxy_headers=self._proxy_headers, timeout=client_timeout
            ) as resp:
                REQUESTS.labels(str(resp.status), "WATCH", self._host_label).inc()
                if resp.status < 400:
                    yield _lines(resp.content)
                    return
                raw = await resp.read()
                retry_after = resp.headers.get("Retry-After")
            if resp.status == 401 and not reauthenticated:
                reauthenticated = True
                if await self._refreshed(headers, "WATCH", url):
                    continue
            try:
                decoded: Any = orjson.loads(raw)
            except orjson.JSONDecodeError:
                decoded = raw
            raise error_from_response(resp.status, decoded, retry_after=retry_after)

    # -- typed helpers -----------------------------------------------------------------------
    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        return await self.request("GET", resource.path(namespace, name))

    async def list_page(
        self, resource: Resource, namespace: str | None = None, **params: Any
    ) -> Any:
        return await self.request("GET", resource.path(namespace), params=params)

    async def list_all(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        page_size: int = 500,
        **params: Any,
    ) -> list[Any]:
        items: list[Any] = []
        token: str | None = None
        while True:
            page = await self.list_page(
                resource, namespace, limit=page_size, _continue=token, **params
            )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    async def create(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        namespace: str | None = None,
        **params: Any,
    ) -> Any:
        return await self.request("POST", resource.path(namespace), body=body, params=params)

    async def replace(
        self,
        resource: Resource,
        body: Mapping[str, Any],
        namespace: str | None = None,
        **params: Any,
    ) -> Any:
        name = body["metadata"]["name"]
        return await self.request("PUT", resource.path(namespace, name), body=body, params=params)

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Any:
        name = body["metadata"]["name"]
        return await self.request("PUT", resource.path(namespace, name, "status"), body=body)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = MERGE_PATCH,
        subresource: str | None = None,
        **params: Any,
    ) -> Any:
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type=content_type,
            params=params,
        )

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
    ) -> Any:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v
        }
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        return await self.request("DELETE", resource.path(namespace, name), body=options)


def _positive_deadline(deadline: float | None) -> float | None:
    if deadline is not None and not deadline > 0:
        raise ValueError(f"a request's deadline must be a positive number of seconds: {deadline}")
    return deadline


def _final(err: ApiError, detail: str) -> ApiError:
    """``err``, the last answer, its message saying why no try follows it (its type, status
    and Retry-After stay: callers branch on those)."""
    err.args = (f"{str(err.args[0]).rstrip()} ({detail})",)
    return err


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split a chunked stream into lines without a line-length limit."""
    pending = b""
    async for chunk in content.iter_any():
        if b"\n" not in chunk:
            pending += chunk
            continue
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        for line in parts:
            if line:
                yield line
    if pending.strip():
        yield pending


async def retry_on_conflict(
    action: Callable[[], Awaitable[T]],
    *,
    attempts: int = 5,
    delay: float = 0.01,
    clock: Clock | None = None,
) -> T:
    """Run ``action`` again (re-reading inside it) while it fails with Conflict.

    client-go's ``retry.DefaultRetry``: five tries, 10 ms apart with 10% jitter.
    """
    sleeper = clock or RealClock()
    for attempt in range(attempts):
        try:
            return await action()
        except Conflict:
            if attempt == attempts - 1:
                raise
            await sleeper.sleep(delay * (1 + 0.1 * random.random()))
    raise AssertionError("unreachable")


__all__ = [
    "APPLY_PATCH",
    "DEFAULT_DEADLINE",
    "JSON_PATCH",
    "MAX_RETRIES",
    "MAX_RETRY_AFTER",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiError",
    "ClusterConfig",
    "KubeClient",
    "Resource",
    "load_config",
    "retry_on_conflict",
    "tls_context",
]
