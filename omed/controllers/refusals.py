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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from omed.events import WARNING, EventSink, truncate_message
from omed.kube.errors import ApiError, BadRequest, Forbidden, Invalid, Unauthorized
from omed.log import kv

REASON_WRITE_REFUSED: Final = "WriteRefused"
"""Warning event reason: a write this reconcile needed was refused by the API server."""
CONDITION_WRITE_REFUSED: Final = "WriteRefused"
"""Condition type: True while a write of the last pass was refused (reason: the API
server's, such as Forbidden); absent once a pass completes without a refusal."""
MSG_WRITE_REFUSED: Final = "Write refused by the API server; retrying with back-off"
"""The WARNING log line, once per refused kind of write per pass."""

FAILED_TEST_MESSAGE: Final = "the server rejected our request due to an error in our request"
"""The API server's whole message for a JSON patch that doesn't apply (a failed ``test``,
a missing path): it keeps the patch library's own text out of the answer."""

_METHOD_NOT_ALLOWED: Final = 405
_REASON_TOKEN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_REFUSALS: Final = (Unauthorized, Forbidden, BadRequest, Invalid)


@dataclass(frozen=True, slots=True)
class RefusedWrite:
    """One write the API server refused: what was sent, to what, and its answer."""

    verb: str
    """The Kubernetes verb: create, update, patch or delete."""
    resource: str
    """The resource with its subresource: ``pods``, ``pods/status``,
    ``inferencereplicas/status``."""
    name: str
    """The object written (for a create, the name it asked for)."""
    status: int
    reason: str
    """The API server's reason, such as Forbidden."""
    error: str
    """The API server's message."""

    @property
    def kind(self) -> tuple[str, str]:
        """What a report groups by: the verb and the resource."""
        return (self.verb, self.resource)

    @property
    def condition_reason(self) -> str:
        """The reason a condition can carry: the API server's, when it is a CamelCase token."""
        return self.reason if _REASON_TOKEN.match(self.reason) else REASON_WRITE_REFUSED

    def message(self) -> str:
        """``patch pods "chat-engine-0-default-0" refused by the API server (403 Forbidden):
        <the API server's message>``, cut to an event message's size."""
        return truncate_message(
            f'{self.verb} {self.resource} "{self.name}" refused by the API server '
            f"({self.status} {self.reason}): {self.error}"
        )


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


def first_of_each_kind(refusals: Sequence[RefusedWrite]) -> list[RefusedWrite]:
    """One refusal per (verb, resource), the first by name, in a stable order: what a pass
    reports, so a pass that refuses 40 gate patches says so once, not 40 times."""
    firsts: dict[tuple[str, str], RefusedWrite] = {}
    for refusal in sorted(refusals, key=lambda r: (r.verb, r.resource, r.name)):
        firsts.setdefault(refusal.kind, refusal)
    return list(firsts.values())


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
