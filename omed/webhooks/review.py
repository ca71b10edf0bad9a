"""AdmissionReview v1 (``admission.k8s.io/v1``): parse a request body, encode the answer.

Why a module of its own: the body comes from the network, so this is the one place where
arbitrary bytes turn into typed values. Everything after it works on an
:class:`AdmissionRequest` whose shape is known.

Invariants:

* :func:`parse_review` returns an :class:`AdmissionRequest` or raises
  :class:`MalformedReview`, whatever the bytes: bad JSON, a non-object, a wrong
  ``apiVersion``/``kind``, a missing ``request`` or ``uid``, an ``object`` that isn't an
  object. The server answers those 400.
* :func:`encode_response` echoes the request's ``uid`` and ``apiVersion``, which the API
  server requires, and sends a JSON Patch base64-encoded with ``patchType: JSONPatch``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

ADMISSION_API_VERSION: Final = "admission.k8s.io/v1"
ADMISSION_KIND: Final = "AdmissionReview"
OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")

STATUS_DENIED: Final = 403
STATUS_INVALID: Final = 400
STATUS_INTERNAL: Final = 500


class MalformedReview(ValueError):
    """The body is not an AdmissionReview v1 request; the message says what is wrong."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` that omed's webhooks read."""

    uid: str
    operation: str
    """CREATE, UPDATE, DELETE or CONNECT."""
    group: str = ""
    version: str = ""
    kind: str = ""
    """``request.kind.kind``: the kind of the object, such as InferenceService."""
    sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    dry_run: bool = False
    username: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionResponse:
    """What a webhook answers: allowed or not, why, warnings, and a JSON Patch."""

    allowed: bool
    message: str = ""
    code: int = 200
    reason: str = ""
    warnings: tuple[str, ...] = ()
    patch: Sequence[Mapping[str, Any]] | None = None
    """JSON Patch operations (RFC 6902) for a mutating webhook; ``None`` for none."""


def allow(
    *, warnings: Sequence[str] = (), patch: Sequence[Mapping[str, Any]] | None = None
) -> AdmissionResponse:
    return AdmissionResponse(allowed=True, warnings=tuple(warnings), patch=patch or None)


def deny(
    message: str, *, code: int = STATUS_DENIED, warnings: Sequence[str] = ()
) -> AdmissionResponse:
    """A refusal. 403 Forbidden, as controller-runtime answers a validator's error."""
    reason = "Forbidden" if code == STATUS_DENIED else ""
    if code == STATUS_INVALID:
        reason = "BadRequest"
    elif code == STATUS_INTERNAL:
        reason = "InternalError"
    return AdmissionResponse(
        allowed=False, message=message, code=code, reason=reason, warnings=tuple(warnings)
    )


def _str(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    return value if isinstance(value, str) else ""


def _object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedReview(f"request.{key} must be an object or null")
    return value


def parse_review(body: bytes) -> AdmissionRequest:
    """The request of an AdmissionReview v1 body; :class:`MalformedReview` for anything else."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedReview(f"body is not valid JSON: {exc}") from None
    if not isinstance(review, dict):
        raise MalformedReview("body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != ADMISSION_API_VERSION or review.get("kind") != ADMISSION_KIND:
        raise MalformedReview(
            f"expected apiVersion {ADMISSION_API_VERSION} and kind {ADMISSION_KIND}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("request.uid must be a non-empty string")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise MalformedReview(f"request.operation must be one of {', '.join(OPERATIONS)}")
    kind = request.get("kind")
    gvk: Mapping[str, Any] = kind if isinstance(kind, dict) else {}
    user = request.get("userInfo")
    dry_run = request.get("dryRun")
    return AdmissionRequest(
        uid=uid,
        operation=str(operation),
        group=_str(gvk, "group"),
        version=_str(gvk, "version"),
        kind=_str(gvk, "kind"),
        sub_resource=_str(request, "subResource"),
        name=_str(request, "name"),
        namespace=_str(request, "namespace"),
        object=_object(request, "object"),
        old_object=_object(request, "oldObject"),
        dry_run=dry_run is True,
        username=_str(user, "username") if isinstance(user, dict) else "",
    )


def encode_response(uid: str, response: AdmissionResponse) -> bytes:
    """The AdmissionReview v1 body that answers request ``uid`` with ``response``."""
    body: dict[str, Any] = {"uid": uid, "allowed": response.allowed}
    if not response.allowed or response.message:
        status: dict[str, Any] = {"code": response.code}
        if response.message:
            status["message"] = response.message
        if response.reason:
            status["reason"] = response.reason
        body["status"] = status
    if response.warnings:
        body["warnings"] = list(response.warnings)
    if response.patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = base64.b64encode(orjson.dumps(list(response.patch))).decode()
    return orjson.dumps(
        {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": body}
    )
