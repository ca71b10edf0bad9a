"""Value parsers for the manager's flags: Go's syntax, then omed's range rules.

Why: the flag grammar (:mod:`omed.config.flags`) and what a flag's value may be are separate
concerns. Each parser here takes the text after ``=`` and returns the typed value, or raises
``ValueError`` whose text is the ``<why>`` in Go's ``invalid value "x" for flag -name: <why>``.

Invariant: a parser accepts a value only when the manager can run with it; anything it
would fail on later (a port above 65535, a negative TTL, a QPS of 0 that client-go would
silently replace with its own default) is refused here, at start, with exit 2.
"""

from __future__ import annotations

import re
from typing import Literal

from omed.api.names import is_dns1123_label, is_dns1123_subdomain
from omed.config import duration
from omed.config.gostrconv import go_quote, parse_go_float, parse_go_int

__all__ = [
    "ZAP_LEVEL_NAMES",
    "ZapLevel",
    "parse_bind_address",
    "parse_duration",
    "parse_kubeconfig",
    "parse_namespace",
    "parse_non_empty",
    "parse_non_negative_duration",
    "parse_non_negative_int",
    "parse_port",
    "parse_positive_float",
    "parse_positive_int",
    "parse_resource_list",
    "parse_workers",
    "parse_zap_encoder",
    "parse_zap_level",
]

ZapLevel = Literal["debug", "info", "error", "panic"] | int
"""A zap level name, or a positive integer: a custom debug level of that verbosity."""

ZAP_LEVEL_NAMES: tuple[Literal["debug", "info", "error", "panic"], ...] = (
    "debug",
    "info",
    "error",
    "panic",
)


def parse_port(text: str) -> int:
    value = parse_go_int(text)
    if not 1 <= value <= 65535:
        raise ValueError("must be between 1 and 65535")
    return value


MAX_WORKERS = 1024
"""The most workers a controller may have. Each is a task on the manager's one event loop, and
the API client's rate (--kube-api-qps, 100 in the chart) feeds far fewer; a mistyped count
(``40000000``) would otherwise make the manager spend its memory on idle tasks at start."""


def parse_workers(text: str) -> int:
    value = parse_go_int(text)
    if value < 0:
        raise ValueError("must be 0 or more (0 means one worker)")
    if value > MAX_WORKERS:
        raise ValueError(f"must be at most {MAX_WORKERS}")
    return max(1, value)


def parse_positive_float(text: str) -> float:
    value = parse_go_float(text)
    if not value > 0:  # also refuses NaN
        raise ValueError("must be a positive number")
    return value


def parse_positive_int(text: str) -> int:
    value = parse_go_int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def parse_non_negative_int(text: str) -> int:
    value = parse_go_int(text)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def parse_duration(text: str) -> float:
    try:
        return duration.parse_duration(text)
    except duration.DurationError as exc:
        raise ValueError(str(exc)) from None


def parse_non_negative_duration(text: str) -> float:
    try:
        nanoseconds = duration.parse_duration_ns(text)
    except duration.DurationError as exc:
        raise ValueError(str(exc)) from None
    if nanoseconds < 0:
        raise ValueError("must not be negative")
    return nanoseconds / 1e9


_PORT_RE = re.compile(r"[0-9]{1,5}")


def parse_bind_address(text: str) -> str:
    # controller-runtime turns a server off with "0"; "" does the same here.
    if text in ("", "0"):
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not _PORT_RE.fullmatch(port) or int(port) > 65535 or " " in host:
        raise ValueError('want host:port, such as ":8080", or "0" to turn the server off')
    return text


def parse_non_empty(text: str) -> str:
    if not text:
        raise ValueError("must not be empty")
    return text


def parse_namespace(text: str) -> str:
    if not is_dns1123_label(text):
        raise ValueError("must be a namespace name (lower-case letters, digits and '-')")
    return text


_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def _resource_name(name: str) -> bool:
    prefix, slash, base = name.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        return False
    return bool(_QUALIFIED_NAME.fullmatch(base))


def parse_resource_list(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    for name in names:
        if not _resource_name(name):
            raise ValueError(f"{go_quote(name)} is not a resource name, such as nvidia.com/gpu")
    return names


def parse_zap_encoder(text: str) -> Literal["console", "json"]:
    # controller-runtime's own wording for this flag.
    if text == "console":
        return "console"
    if text == "json":
        return "json"
    raise ValueError(f"invalid encoder value {go_quote(text)}")


_ATOI = re.compile(r"[+-]?[0-9]+")


def parse_zap_level(text: str) -> ZapLevel:
    # controller-runtime: a level name (any case), or an integer > 0 for debug verbosity.
    lowered = text.lower()
    for name in ZAP_LEVEL_NAMES:
        if lowered == name:
            return name
    if _ATOI.fullmatch(text) and 0 < int(text) < (1 << 63):
        return int(text)
    raise ValueError(f"invalid log level {go_quote(text)}")


def parse_kubeconfig(text: str) -> str | None:
    return text or None
