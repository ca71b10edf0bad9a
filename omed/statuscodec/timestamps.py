"""Canonical RFC 3339 timestamps as integers, so ColumnarV2 can delta-code them.

A fleet's rows carry many timestamps (``readySince``, condition transitions, operation times)
drawn from few moments: Instances created in one batch became Ready together. ColumnarV2 keeps
such strings in a ``times`` table of seconds since the epoch, written as deltas, instead of
twenty bytes each. Only the one spelling that Kubernetes writes for ``metav1.Time``,
``YYYY-MM-DDTHH:MM:SSZ``, is converted; any other string (fractional seconds, an offset, a leap
second, not a time at all) stays a plain string.

Invariant: ``render(parse(s)) == s`` for every ``s`` that :func:`parse` accepts, and
:func:`parse` accepts exactly what :func:`render` produces for ``MIN_EPOCH..MAX_EPOCH``. That
is what makes the conversion lossless.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

_EPOCH_ORDINAL: Final = dt.date(1970, 1, 1).toordinal()
MIN_EPOCH: Final = (dt.date(1, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86400
"""0001-01-01T00:00:00Z."""
MAX_EPOCH: Final = (dt.date(9999, 12, 31).toordinal() - _EPOCH_ORDINAL) * 86400 + 86399
"""9999-12-31T23:59:59Z."""


CANONICAL_TIME: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
"""The shape of the one spelling Kubernetes writes for ``metav1.Time`` (ASCII digits, ``T``,
``Z``); whether the digits name a real instant is the reader's to check."""
_DAY_CACHE_LIMIT: Final = 4096
_days: dict[str, int | None] = {}


def parse(text: str) -> int | None:
    """Seconds since the epoch of a canonical ``YYYY-MM-DDTHH:MM:SSZ``, else ``None``."""
    if len(text) != 20 or CANONICAL_TIME.fullmatch(text) is None:
        return None
    date_part = text[:10]
    days = _days.get(date_part, -1)
    if days == -1:
        try:
            days = dt.date.fromisoformat(date_part).toordinal() - _EPOCH_ORDINAL
        except ValueError:
            days = None
        if len(_days) >= _DAY_CACHE_LIMIT:
            _days.clear()
        _days[date_part] = days
    if days is None:
        return None
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if hour > 23 or minute > 59 or second > 59:
        return None
    return days * 86400 + hour * 3600 + minute * 60 + second


def render(epoch: int) -> str:
    """The canonical spelling of ``epoch`` (which must lie in ``MIN_EPOCH..MAX_EPOCH``)."""
    days, seconds = divmod(epoch, 86400)
    day = dt.date.fromordinal(days + _EPOCH_ORDINAL)
    hour, rest = divmod(seconds, 3600)
    minute, second = divmod(rest, 60)
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"
