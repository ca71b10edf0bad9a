"""A write the API server refused for good, as a value: what the cores decide with.

Why: the controllers' pure cores show a refusal as condition
:data:`CONDITION_WRITE_REFUSED` and remember it between passes; they must not import the
classification of API errors or the reporting (the API client's errors, the event recorder,
the log), which :mod:`.refusals` does in the shells.

Invariant: a refusal's message and condition reason are functions of the write and the API
server's answer only, so a repeat is the same event and the same condition.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from omed.api.events import truncate_message

REASON_WRITE_REFUSED: Final = "WriteRefused"
"""Warning event reason: a write this reconcile needed was refused by the API server."""
CONDITION_WRITE_REFUSED: Final = "WriteRefused"
"""Condition type: True while a write of the last pass was refused (reason: the API
server's, such as Forbidden); absent once a pass completes without a refusal."""
_REASON_TOKEN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


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


def first_of_each_kind(refusals: Sequence[RefusedWrite]) -> list[RefusedWrite]:
    """One refusal per (verb, resource), the first by name, in a stable order: what a pass
    reports, so a pass that refuses 40 gate patches says so once, not 40 times."""
    firsts: dict[tuple[str, str], RefusedWrite] = {}
    for refusal in sorted(refusals, key=lambda r: (r.verb, r.resource, r.name)):
        firsts.setdefault(refusal.kind, refusal)
    return list(firsts.values())
