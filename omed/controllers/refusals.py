"""Writes the API server refuses for good: which answers they are, and how they are reported.

Why: a write answered 403 Forbidden (RBAC, an admission plugin), 401 Unauthorized, 400 Bad
Request or 422 Invalid (a body omed built that the API server or a webhook won't take) or
405 Method Not Allowed is not helped by sending it again at once: it goes through only once
someone changes the cluster (a Role, a webhook, a policy). Both controllers report such a
write where a user looks, a Warning event :data:`REASON_WRITE_REFUSED` on the object whose
reconcile needed it and a condition :data:`CONDITION_WRITE_REFUSED` on that object's status,
log it at WARNING, and let the workqueue's per-key back-off pace the next attempts.

Not refusals, though they share a status code:

* a JSON patch whose ``test`` failed or whose path is gone: the object changed since it was
  read. The API server answers 422 with its generic text and no causes
  (:func:`failed_test`); the next pass reads the newer object;
* a patch that carries ``metadata.uid`` and meets a newer pod of the name: 422 naming
  ``metadata.uid`` (:func:`uid_changed`);
* 413 and etcd's ``request is too large`` (:class:`~omed.kube.errors.TooLarge`), which have
  their own events; 403 ``exceeded quota`` and ``failed calling webhook`` on a pod create,
  which hold the operation under a waiting token.

Invariant: the message a refusal makes is a function of the write and the API server's
answer only, so a repeat is the same event (the recorder aggregates it) and the same
condition (its transition time stays). :func:`report` is the one place both controllers
log and record refusals, so they read the same.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from omed.controllers.refusedwrite import (
    CONDITION_WRITE_REFUSED,
    REASON_WRITE_REFUSED,
    RefusedWrite,
    first_of_each_kind,
)
from omed.events import WARNING, EventSink
from omed.kube.errors import ApiError, BadRequest, Forbidden, Invalid, Unauthorized
from omed.log import kv

MSG_WRITE_REFUSED: Final = "Write refused by the API server; retrying with back-off"
"""The WARNING log line, once per refused kind of write per pass."""

FAILED_TEST_MESSAGE: Final = "the server rejected our request due to an error in our request"
"""The API server's whole message for a JSON patch that doesn't apply (a failed ``test``,
a missing path): it keeps the patch library's own text out of the answer."""

_METHOD_NOT_ALLOWED: Final = 405
_REFUSALS: Final = (Unauthorized, Forbidden, BadRequest, Invalid)


def refused_write(
    err: BaseException, *, verb: str, resource: str, name: str
) -> RefusedWrite | None:
    """``err`` as a refusal of ``verb resource name``, or ``None`` when it isn't one.

    The caller rules out first what its own write can meet for other reasons
    (:func:`failed_test`, :func:`uid_changed`, a quota or webhook hold)."""
    if not isinstance(err, ApiError):
        return None
    if not isinstance(err, _REFUSALS) and err.status != _METHOD_NOT_ALLOWED:
        return None
    return RefusedWrite(
        verb=verb,
        resource=resource,
        name=name,
        status=err.status,
        reason=err.reason or type(err).__name__,
        error=err.message,
    )


def failed_test(err: BaseException) -> bool:
    """A JSON patch that didn't apply to the object as it is now (a failed ``test``)."""
    return isinstance(err, Invalid) and err.message.strip() == FAILED_TEST_MESSAGE


def uid_changed(err: BaseException) -> bool:
    """A patch carrying ``metadata.uid`` that met another pod of the name (the uid is
    immutable, so the API server answers 422 naming the field)."""
    return isinstance(err, Invalid) and "metadata.uid" in err.message


def report(
    refusals: Sequence[RefusedWrite],
    *,
    key: str,
    involved: Mapping[str, Any] | None,
    events: EventSink | None,
    logger: logging.Logger,
    requeues: int,
) -> list[RefusedWrite]:
    """Log and record one pass's refusals; the first of each kind, which were reported.

    One WARNING line per kind of write (with how many of that kind were refused and the
    key's back-off step so far, ``requeues``) and one Warning :data:`REASON_WRITE_REFUSED`
    event on ``involved`` (the object whose reconcile needed the writes; none when it is
    gone). A pass runs once per back-off step, so that is once per step, and the recorder's
    budget and aggregation take care of repeats."""
    firsts = first_of_each_kind(refusals)
    for refusal in firsts:
        logger.warning(
            MSG_WRITE_REFUSED,
            extra=kv(
                key=key,
                verb=refusal.verb,
                resource=refusal.resource,
                name=refusal.name,
                code=refusal.status,
                reason=refusal.reason,
                error=refusal.error[:1000],
                refused=sum(1 for r in refusals if r.kind == refusal.kind),
                requeues=requeues,
            ),
        )
        if involved is not None and events is not None:
            events.event(
                involved, type=WARNING, reason=REASON_WRITE_REFUSED, message=refusal.message()
            )
    return firsts


__all__ = [
    "CONDITION_WRITE_REFUSED",
    "FAILED_TEST_MESSAGE",
    "MSG_WRITE_REFUSED",
    "REASON_WRITE_REFUSED",
    "RefusedWrite",
    "failed_test",
    "first_of_each_kind",
    "refused_write",
    "report",
    "uid_changed",
]
