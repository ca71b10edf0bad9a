"""What a validator found in one object: errors that refuse it, warnings that admit it.

Why: every rule of every validator reports through :class:`Findings`, so all messages have
one shape, ``<field path>: <what is wrong>`` (``spec.engine.minReplicas: must be >= 0, got
-1``), and one policy decides what an UPDATE may keep.

That policy is *ratcheting*, as the API server applies it to CRD schemas: an error about
values that the UPDATE leaves exactly as they were stored becomes a warning. So a rule added
in a newer omed (or an object stored by upstream OME before omed's webhook ran) never blocks
an unrelated edit, such as a label change or a finalizer removal; the user hears of the
problem, and the next change to those values must fix it. An error marked
``ratchet=False`` (a policy reference while its feature is off) refuses the write whatever
changed.

Invariants: a message never quotes more than :data:`MAX_SHOWN` characters of a user's value,
and a value the rule deems secret is never quoted at all (callers pass no ``got``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeGuard

import orjson

from omed.api.names import is_dns1123_subdomain

Loc = tuple[str | int, ...]
"""Where a value sits in an object: keys and list indices from the root."""

MAX_SHOWN: Final = 64
"""Most characters of a user's value that a message quotes."""
MAX_ERRORS_SHOWN: Final = 10
"""Most errors one refusal lists; the rest are counted."""
RATCHET_NOTE: Final = " (admitted because the value is unchanged from the stored object)"

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MISSING: Final = object()


def format_loc(loc: Loc) -> str:
    """``spec.engine.lifecycle``, ``spec.rollout.groups[0]``,
    ``metadata.annotations[ome.io/deploymentMode]``."""
    out: list[str] = []
    for part in loc:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.fullmatch(part):
            out.append(f".{part}" if out else part)
        else:
            out.append(f"[{part}]")
    return "".join(out)


def show(value: Any) -> str:
    """A user's value as JSON, cut to :data:`MAX_SHOWN` characters."""
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    if len(text) > MAX_SHOWN:
        text = text[: MAX_SHOWN - 3] + "..."
    return text


def lookup(obj: Any, loc: Loc) -> Any:
    """The value at ``loc`` in ``obj``, or a private sentinel when any step is missing."""
    current = obj
    for part in loc:
        if isinstance(part, int):
            if not isinstance(current, list) or not 0 <= part < len(current):
                return _MISSING
            current = current[part]
        else:
            if not isinstance(current, dict) or part not in current:
                return _MISSING
            current = current[part]
    return current


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer (``true`` is not one, though Python's bool is an int)."""
    return value.__class__ is int or (isinstance(value, int) and not isinstance(value, bool))


@dataclass(frozen=True, slots=True)
class Issue:
    """One refusal: its message and the values it was computed from."""

    message: str
    depends: tuple[Loc, ...]
    ratchet: bool = True


@dataclass(slots=True)
class Findings:
    """Errors and warnings about one object, in the order the rules ran."""

    errors: list[Issue] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def error(
        self,
        loc: Loc,
        text: str,
        *,
        depends: Sequence[Loc] | None = None,
        ratchet: bool = True,
    ) -> None:
        """Refuse the object: ``<loc>: <text>``. ``depends`` lists the values the rule read
        (``loc`` alone when omitted); the UPDATE keeps them all unchanged -> a warning."""
        self.errors.append(
            Issue(
                message=f"{format_loc(loc)}: {text}",
                depends=tuple(depends) if depends is not None else (loc,),
                ratchet=ratchet,
            )
        )

    def refuse(self, message: str, *, depends: Sequence[Loc]) -> None:
        """Refuse the object with ``message`` as it stands (a rule whose wording is
        upstream's, with no field path in front); ratcheted on ``depends`` like
        :meth:`error`."""
        self.errors.append(Issue(message=message, depends=tuple(depends)))

    def warn(self, loc: Loc, text: str) -> None:
        """Admit the object, and tell the user ``<loc>: <text>``."""
        self.warnings.append(f"{format_loc(loc)}: {text}")

    def ratchet(self, *, new: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        """Turn into warnings the errors about values that ``old`` already stored."""
        if old is None:
            return
        kept: list[Issue] = []
        for issue in self.errors:
            if issue.ratchet and all(lookup(new, loc) == lookup(old, loc) for loc in issue.depends):
                self.warnings.append(issue.message + RATCHET_NOTE)
            else:
                kept.append(issue)
        self.errors = kept

    def refusal(self) -> str:
        """The errors as one message: all of them, up to :data:`MAX_ERRORS_SHOWN`."""
        shown = [issue.message for issue in self.errors[:MAX_ERRORS_SHOWN]]
        rest = len(self.errors) - len(shown)
        if rest > 0:
            shown.append(f"and {rest} more")
        return "; ".join(shown)


# -- Common value rules ----------------------------------------------------------------------

DNS1123_SUBDOMAIN_RULE: Final = (
    "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
    "ending with a letter or digit, at most 253 characters)"
)


def check_subdomain(findings: Findings, loc: Loc, *, value: Any) -> None:
    """A reference to a named object: a DNS-1123 subdomain."""
    if not is_dns1123_subdomain(value):
        findings.error(loc, f"{DNS1123_SUBDOMAIN_RULE}, got {show(value)}")


def as_object(findings: Findings, loc: Loc, *, value: Any) -> Mapping[str, Any] | None:
    """``value`` when it is a JSON object; ``None`` for null or absent; else an error."""
    if value is None or value is _MISSING:
        return None
    if isinstance(value, dict):
        return value
    findings.error(loc, f"must be an object, got {show(value)}")
    return None


def check_choice(findings: Findings, loc: Loc, *, value: Any, choices: Sequence[str]) -> None:
    """``value``, when set, is one of ``choices``."""
    if value is None or (value.__class__ is str and value in choices):
        return
    if not isinstance(value, str) or value not in choices:
        findings.error(loc, f"must be one of {', '.join(choices)}, got {show(value)}")


def check_min_int(findings: Findings, loc: Loc, *, value: Any, minimum: int) -> int | None:
    """``value``, when set, is an integer >= ``minimum``; returns it when it is."""
    if value.__class__ is int and value >= minimum:
        return value
    if value is None:
        return None
    if not is_int(value):
        findings.error(loc, f"must be an integer, got {show(value)}")
        return None
    if value < minimum:
        findings.error(loc, f"must be >= {minimum}, got {value}")
        return None
    return value
