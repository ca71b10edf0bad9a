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
from typing import Any, ClassVar, Final

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


ALLOWED: Final = AdmissionResponse(allowed=True)
"""The plain admission (no warnings, no patch), shared: the response is immutable."""


def allow(
    *, warnings: Sequence[str] = (), patch: Sequence[Mapping[str, Any]] | None = None
) -> AdmissionResponse:
    if not warnings and not patch:
        return ALLOWED
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
    return value if value.__class__ is str else ""


def _object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None or value.__class__ is dict:
        return value
    raise MalformedReview(f"request.{key} must be an object or null")


def parse_review(body: bytes) -> AdmissionRequest:
    """The request of an AdmissionReview v1 body; :class:`MalformedReview` for anything else.

    orjson makes only plain ``dict``, ``list`` and ``str`` values, so exact class checks
    (cheaper than ``isinstance``, and on the path of every admission) say the same.
    """
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedReview(f"body is not valid JSON: {exc}") from None
    if review.__class__ is not dict:
        raise MalformedReview("body must be a JSON object (an AdmissionReview)")
    get = review.get
    if get("apiVersion") != ADMISSION_API_VERSION or get("kind") != ADMISSION_KIND:
        raise MalformedReview(
            f"expected apiVersion {ADMISSION_API_VERSION} and kind {ADMISSION_KIND}"
        )
    request = get("request")
    if request.__class__ is not dict:
        raise MalformedReview("AdmissionReview has no request object")
    get = request.get
    uid = get("uid")
    if uid.__class__ is not str or not uid:
        raise MalformedReview("request.uid must be a non-empty string")
    operation = get("operation")
    if operation not in OPERATIONS:
        raise MalformedReview(f"request.operation must be one of {', '.join(OPERATIONS)}")
    gvk = get("kind")
    if gvk.__class__ is not dict:
        gvk = _NO_GVK
    user = get("userInfo")
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        group=_str(gvk, "group"),
        version=_str(gvk, "version"),
        kind=_str(gvk, "kind"),
        sub_resource=_str(request, "subResource"),
        name=_str(request, "name"),
        namespace=_str(request, "namespace"),
        object=_object(request, "object"),
        old_object=_object(request, "oldObject"),
        dry_run=get("dryRun") is True,
        username=_str(user, "username") if user.__class__ is dict else "",
    )


_NO_GVK: Final[Mapping[str, Any]] = {}


def is_deleting(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` carries a deletionTimestamp (finalizers are running)."""
    metadata = obj.get("metadata") if obj is not None else None
    return isinstance(metadata, dict) and metadata.get("deletionTimestamp") is not None


@dataclass(frozen=True, slots=True)
class Write:
    """A CREATE or UPDATE that a validating webhook must check with its rules."""

    obj: Mapping[str, Any]
    old: Mapping[str, Any] | None
    """The stored object of an UPDATE; ``None`` for a CREATE."""


def screen_write(request: AdmissionRequest, *, kind: str, plural: str) -> AdmissionResponse | Write:
    """What every validating webhook decides before its own rules: other operations are
    admitted; a review of another kind, or without ``object``, is refused as invalid; an
    UPDATE of an object already being deleted is admitted (its finalizers must be able to
    finish). Anything else is a :class:`Write` for the rules."""
    if request.operation not in ("CREATE", "UPDATE"):
        return ALLOWED
    if request.kind and request.kind != kind:
        return deny(
            f"this webhook validates {plural}, got kind {request.kind}", code=STATUS_INVALID
        )
    obj = request.object
    if obj is None:
        return deny(
            f"request.object is missing from the {request.operation} review",
            code=STATUS_INVALID,
        )
    old = request.old_object if request.operation == "UPDATE" else None
    if request.operation == "UPDATE" and (is_deleting(obj) or is_deleting(old)):
        return ALLOWED
    return Write(obj=obj, old=old)


class WriteValidator:
    """Base of a validating webhook whose rules read only the request: :meth:`admit` answers
    with :meth:`review` (pure: no I/O), which screens the request (:func:`screen_write`, for
    the subclass's ``kind`` and ``plural``) and hands a :class:`Write` to :meth:`check`."""

    kind: ClassVar[str]
    plural: ClassVar[str]

    async def admit(self, request: AdmissionRequest) -> AdmissionResponse:
        return self.review(request)

    def review(self, request: AdmissionRequest) -> AdmissionResponse:
        """The answer to one AdmissionReview request (pure: no I/O)."""
        write = screen_write(request, kind=self.kind, plural=self.plural)
        return self.check(write) if isinstance(write, Write) else write

    def check(self, write: Write) -> AdmissionResponse:
        """The kind's own rules for a write that passed the screen."""
        raise NotImplementedError


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
