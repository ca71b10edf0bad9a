"""Go-style durations, as the simulator's annotations spell them and the kubelet prints them.

Durations use Go's ``time.ParseDuration`` spelling (``2s``, ``500ms``, ``1m30s``); a bare
number means seconds. :func:`format_duration` is ``time.Duration.String``, for the messages
the kubelet writes (``back-off 20s restarting failed container``).
"""

from __future__ import annotations

import math
import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: str | float) -> float:
    """Seconds in a Go duration (``"1m30s"`` -> 90.0); a bare number is seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"negative duration: {value!r}")
        return float(value)
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds < 0 or math.isnan(seconds):
            raise ValueError(f"not a duration: {value!r}")
        return seconds
    if not text or _DURATION_PART.sub("", text):
        raise ValueError(f"not a duration: {value!r}")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))


def format_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` for the values the kubelet prints: ``200ms``, ``1m20s``."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        ms = round(seconds * 1000, 3)
        return f"{ms:g}ms"
    whole_minutes, rest = divmod(round(seconds, 3), 60)
    hours, minutes = divmod(int(whole_minutes), 60)
    text = f"{rest:g}s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    if minutes:
        return f"{minutes}m{text}"
    return text
