"""The one way omed talks to the API server.

kubernetes-asyncio loads the kubeconfig or the in-cluster config and its auth (client
certificates, bearer tokens, exec plugins); requests then go through one aiohttp session
per client, with bodies decoded by orjson into plain dicts. Model objects are never built:
the caches and controllers read JSON-shaped dicts, which is several times cheaper.

Invariants:
- every request passes the client's :class:`~omed.kube.ratelimit.TokenBucket`; a request held
  back more than a second logs ``Waited before sending request`` with the delay, the verb and
  the URL, as client-go does, and the wait is observed in
  ``rest_client_rate_limiter_duration_seconds``;
- every answer is counted in ``rest_client_requests_total{code,method,host}``;
- an error status becomes a typed :mod:`omed.kube.errors` exception.
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
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote, urlencode, urlsplit

import aiohttp
import orjson
from prometheus_client import Counter, Histogram

from omed.clock import Clock, RealClock
from omed.kube.errors import ApiError, Conflict, error_from_response
from omed.kube.proxy import ProxyEnvironment, parse_proxy_url
from omed.kube.ratelimit import TokenBucket
from omed.log import kv
from omed.metrics import REGISTRY

log = logging.getLogger("omed.kube")

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
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
    registry=REGISTRY,
)
REQUEST_LATENCY = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
    registry=REGISTRY,
)

WAIT_LOG_THRESHOLD = 1.0
MAX_RETRIES = 10
"""How many times a request answered "wait and retry" is sent again (client-go's default)."""
MAX_RETRY_AFTER = 60
"""The longest wait, in seconds, a Retry-After gets (client-go takes any)."""


def retry_after_seconds(status: int, retry_after: str | None) -> int | None:
    """How long to wait before sending a request again, or ``None`` to fail it now.

    As client-go's ``checkWait``: an answer of 429 or any 5xx that carries ``Retry-After``
    in whole seconds means the API server didn't act on the request (API Priority and
    Fairness rejecting it, a resource's storage still initializing after a CRD is installed,
    an apiserver shutting down), so it may be sent again, whatever its verb. A negative
    value waits nothing; a value over :data:`MAX_RETRY_AFTER` waits only that maximum.
    """
    if retry_after is None or (status != 429 and status < 500):
        return None
    try:
        seconds = int(retry_after.strip())
    except ValueError:
        return None  # an HTTP date: client-go doesn't wait on those either
    return min(max(seconds, 0), MAX_RETRY_AFTER)


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
    token: Callable[[], Awaitable[str | None]] | None = None
    impersonate_user: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    proxy: str | None = None
    """The proxy requests go through (:mod:`omed.kube.proxy`), or ``None`` for direct."""

    def impersonating(self, user: str, groups: tuple[str, ...] = ()) -> ClusterConfig:
        return dataclasses.replace(self, impersonate_user=user, impersonate_groups=groups)


async def load_config(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClusterConfig:
    """Load a kubeconfig file (``$KUBECONFIG`` or ``~/.kube/config``) or the in-cluster config,
    and the proxy to reach its server through (the cluster's ``proxy-url``, else Go's
    ``HTTPS_PROXY``/``NO_PROXY`` rules over ``environ``, by default ``os.environ``).

    Raises :class:`FileNotFoundError` for a named kubeconfig that doesn't exist (the library
    would read it as empty and complain about missing contexts), and
    :class:`~omed.kube.proxy.ProxyConfigError` for a proxy setting that can't be used.
    """
    from kubernetes_asyncio import config as kconfig
    from kubernetes_asyncio.client import Configuration

    env = os.environ if environ is None else environ
    configuration = Configuration()
    path = kubeconfig or env.get("KUBECONFIG")
    if path or not env.get("KUBERNETES_SERVICE_HOST"):
        _check_kubeconfig_exists(path, named=kubeconfig is not None)
        await kconfig.load_kube_config(
            config_file=path,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=_temp_dir(),
        )
    else:
        kconfig.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    host = str(configuration.host or "").rstrip("/")
    if configuration.proxy:
        proxy = parse_proxy_url(str(configuration.proxy), source="the cluster's proxy-url")
    else:
        proxy = ProxyEnvironment.from_environ(env).proxy_for(host)
    if configuration.verify_ssl:
        ssl_context: ssl.SSLContext | bool = ssl.create_default_context(
            cafile=configuration.ssl_ca_cert
        )
        if configuration.cert_file:
            assert isinstance(ssl_context, ssl.SSLContext)
            ssl_context.load_cert_chain(configuration.cert_file, configuration.key_file)
    else:
        ssl_context = False

    async def token() -> str | None:
        hook: Any = configuration.refresh_api_key_hook
        if hook is not None:
            result = hook(configuration)
            if asyncio.iscoroutine(result):
                await result
        value = configuration.api_key.get("authorization") or configuration.api_key.get(
            "BearerToken"
        )
        if not value:
            return None
        prefix = configuration.api_key_prefix.get("authorization")
        text = str(value)
        return text if text.lower().startswith("bearer ") or not prefix else f"{prefix} {text}"

    return ClusterConfig(host=host, ssl_context=ssl_context, token=token, proxy=proxy)


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


class KubeClient:
    """An API client with one rate limiter, one connection pool and typed errors."""

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
    ) -> None:
        self.config = config
        self._max_retries = max_retries
        self.limiter = TokenBucket(qps=qps, burst=burst, clock=clock or RealClock())
        self._host_label = urlsplit(config.host).netloc
        self._user_agent = user_agent
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._proxy, self._proxy_headers = _proxy_and_headers(config.proxy)

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

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self._user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        if self.config.token is not None:
            token = await self.config.token()
            if token:
                headers["Authorization"] = token if " " in token else f"Bearer {token}"
        if self.config.impersonate_user:
            headers["Impersonate-User"] = self.config.impersonate_user
        return headers

    async def _throttle(self, method: str, url: str) -> None:
        waited = await self.limiter.wait()
        LIMITER_WAIT.labels(method, self._host_label).observe(waited)
        if waited > WAIT_LOG_THRESHOLD:
            log.info(
                "Waited before sending request",
                extra=kv(delay=f"{waited:.3f}s", verb=method, URL=url),
            )

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
    ) -> Any:
        """Send one request; return the decoded JSON answer or raise a typed ApiError.

        An answer that asks to wait and retry (:func:`retry_after_seconds`) is waited out and
        the request sent again, through the rate limiter, up to ``max_retries`` times."""
        url = self._url(path, params)
        data = None if body is None else (body if isinstance(body, bytes) else orjson.dumps(body))
        attempt = 0
        while True:
            status, decoded, retry_after = await self._send(
                method, url, data=data, content_type=content_type, timeout=timeout
            )
            if status < 400:
                return decoded
            wait = retry_after_seconds(status, retry_after)
            if wait is None or attempt >= self._max_retries:
                raise error_from_response(status, decoded, retry_after=retry_after)
            attempt += 1
            log.debug(
                "Got a Retry-After response",
                extra=kv(code=status, delay=f"{wait}s", attempt=attempt, verb=method, URL=url),
            )
            await asyncio.sleep(wait)

    async def _send(
        self,
        method: str,
        url: str,
        *,
        data: bytes | None,
        content_type: str,
        timeout: float | None,
    ) -> tuple[int, Any, str | None]:
        """One try: the status, the decoded body and the Retry-After header."""
        await self._throttle(method, url)
        headers = await self._headers(content_type if data is not None else None)
        group_headers = [("Impersonate-Group", g) for g in self.config.impersonate_groups]
        all_headers = list(headers.items()) + group_headers
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with self._http().request(
                method,
                url,
                data=data,
                headers=all_headers,
                proxy_headers=self._proxy_headers,
                timeout=aiohttp.ClientTimeout(total=timeout or self._timeout),
            ) as response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError):
            REQUESTS.labels("<error>", method, self._host_label).inc()
            raise
        REQUESTS.labels(str(status), method, self._host_label).inc()
        REQUEST_LATENCY.labels(method, self._host_label).observe(loop.time() - started)
        decoded: Any
        try:
            decoded = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            decoded = raw
        return status, decoded, retry_after

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a streaming GET (a watch) and yield an iterator over its lines."""
        url = self._url(path, params)
        await self._throttle("GET", url)
        headers = await self._headers(None)
        all_headers = list(headers.items()) + [
            ("Impersonate-Group", g) for g in self.config.impersonate_groups
        ]
        client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=10)
        async with self._http().get(
            url, headers=all_headers, proxy_headers=self._proxy_headers, timeout=client_timeout
        ) as resp:
            REQUESTS.labels(str(resp.status), "WATCH", self._host_label).inc()
            if resp.status >= 400:
                raw = await resp.read()
                try:
                    decoded: Any = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    decoded = raw
                raise error_from_response(
                    resp.status, decoded, retry_after=resp.headers.get("Retry-After")
                )
            yield _lines(resp.content)

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
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiError",
    "ClusterConfig",
    "KubeClient",
    "Resource",
    "load_config",
    "retry_on_conflict",
]
