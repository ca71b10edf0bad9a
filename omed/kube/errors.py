"""Typed API errors, so callers branch on what happened, not on status codes.

The API server's ``Status`` body says what went wrong; :func:`error_from_response` maps it to
one class. ``TooLarge`` covers both ways a write can be too big: the API server's 413 and
etcd's ``request is too large`` (which arrives as a 500 with that text).

``TooManyRequests.retry_after`` is what the informers wait at least before they list or
watch again (:func:`parse_retry_after`): the header's seconds, at most
:data:`MAX_RETRY_AFTER`; a header that is missing or not a finite, non-negative number
counts as absent (:data:`DEFAULT_RETRY_AFTER`, under the reflector's own back-off).
"""

from __future__ import annotations

import math
from typing import Any, Final

MAX_RETRY_AFTER: Final = 30.0
"""The longest wait, in seconds, a Retry-After asks of an informer: the reflector's longest
back-off (:class:`omed.informers.backoff.Backoff`'s cap, client-go's 30 s). client-go's
reflector backs off on a 429 without reading Retry-After at all, so it never waits longer;
a header from a proxy or a confused server (``3600``, ``1e9``) would otherwise freeze a
cache that still reports synced."""
DEFAULT_RETRY_AFTER: Final = 1.0
"""The wait of a 429 without a usable Retry-After."""


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds, at most :data:`MAX_RETRY_AFTER`; ``None`` when it is missing
    or not a finite, non-negative number (``inf``, ``nan``, ``-5``, an HTTP date)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_RETRY_AFTER)


class ApiError(Exception):
    """A request the API server answered with an error status."""

    def __init__(self, status: int, reason: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body


class BadRequest(ApiError): ...


class Unauthorized(ApiError): ...


class Forbidden(ApiError): ...


class NotFound(ApiError): ...


class Conflict(ApiError):
    """409 with reason Conflict: the object changed since it was read (optimistic lock)."""


class AlreadyExists(ApiError):
    """409 with reason AlreadyExists: a create found the name taken."""


class Gone(ApiError):
    """410: the resourceVersion asked for has been compacted away."""


class TooLarge(ApiError):
    """The write is larger than the API server or etcd accepts."""


class Invalid(ApiError):
    """422: the object breaks the schema or a validation rule (webhooks included)."""


class TooManyRequests(ApiError):
    """429. ``retry_after``: the seconds to wait at least (:func:`parse_retry_after`)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: Any = None,
        retry_after: float = DEFAULT_RETRY_AFTER,
    ) -> None:
        super().__init__(status, reason, message, body)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx other than a too-large write: usually worth a retry."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    413: TooLarge,
    422: Invalid,
}

_TOO_LARGE_TEXT = ("request is too large", "too large resource version", "request entity too large")


def error_from_response(status: int, body: Any, *, retry_after: str | None = None) -> ApiError:
    reason = ""
    message = ""
    if isinstance(body, dict):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
    elif isinstance(body, (bytes, str)):
        message = body.decode(errors="replace") if isinstance(body, bytes) else body
    lowered = message.lower()
    if status == 409:
        cls: type[ApiError] = AlreadyExists if reason == "AlreadyExists" else Conflict
        return cls(status, reason or "Conflict", message, body)
    if status == 429:
        delay = parse_retry_after(retry_after)
        if delay is None:
            delay = DEFAULT_RETRY_AFTER
        return TooManyRequests(status, reason or "TooManyRequests", message, body, delay)
    if "request is too large" in lowered or "request entity too large" in lowered:
        return TooLarge(status, reason or "RequestEntityTooLarge", message, body)
    if status == 504 and "too large resource version" in lowered:
        return Gone(status, reason or "Timeout", message, body)
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, reason or cls.__name__, message, body)


def is_too_large_resource_version(err: ApiError) -> bool:
    return "too large resource version" in err.message.lower()
