"""The two string grammars of ColumnarV2: value sequences and range sets.

A *value sequence* spells a list of tokens (integers, or ``~`` for "absent") compactly:
``0-19999`` is twenty thousand ascending integers, ``3*200`` is 3 two hundred times, and items
join with commas. A *range set* names row positions: ``17,4500-4501``.

Why strings and not JSON arrays: one item costs a few bytes instead of an array per run, and
the API server still types the field (``type: string``). Why a hand parser: a decoder must
bound its work by what the object declares, before it allocates. So every parse is given the
length it must produce (or a limit) and checks each item's size *before* expanding it:
``0*99999999999`` fails on its count, never after building a list.

Invariant: parsing raises :class:`~omed.statuscodec.errors.DecodeError` only, with
``range_syntax`` for a malformed item, ``coverage`` for a sequence longer or shorter than its
table or a position outside the table or named twice, ``bounds`` for a sequence over its
limit, and ``type`` for a value that isn't a string. :func:`format_sequence` and
:func:`format_ranges` write only what the parsers accept.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, groupby, islice, pairwise, repeat
from operator import ne, sub
from typing import Final, cast

from omed.statuscodec.errors import DecodeError, describe, type_name

ABSENT: Final = "~"
"""The token of an absent value."""

MAX_DIGITS: Final = 19
"""The most digits a number may have: enough for any int64."""

_INT: Final = r"(?:0|[1-9][0-9]{0,18})"
_ITEM: Final = re.compile(
    rf"(?P<value>~|-?{_INT})(?:\*(?P<count>[1-9][0-9]{{0,18}}))?|(?P<lo>{_INT})-(?P<hi>{_INT})"
)
_RANGE: Final = re.compile(rf"(?P<lo>{_INT})(?:-(?P<hi>{_INT}))?")

Token = int | None
"""A decoded token: an integer, or ``None`` for ``~`` (absent)."""


def _plain(item: str) -> bool:
    """``item`` is a canonical non-negative integer (the common case, parsed without regex)."""
    return (
        item.isascii()
        and item.isdigit()
        and len(item) <= MAX_DIGITS
        and (item[0] != "0" or len(item) == 1)
    )


_LEADING_ZERO: Final = re.compile(r"(?:^|,)0[0-9]")


def _all_plain(text: str, items: list[str]) -> bool:
    """Every item is a canonical non-negative integer (checked with C-level string scans)."""
    return (
        len(items) > 8
        and text.replace(",", "").isdigit()
        and text.isascii()
        and "" not in items
        and max(map(len, items)) <= MAX_DIGITS
        and _LEADING_ZERO.search(text) is None
    )


def _plain_items(text: str, items: list[str]) -> bool:
    """Every item is a canonical non-negative integer; :func:`_all_plain` for short texts."""
    return (
        text.replace(",", "").isdigit()
        and text.isascii()
        and "" not in items
        and max(map(len, items)) <= MAX_DIGITS
        and _LEADING_ZERO.search(text) is None
    )


_consume: Final[Callable[[Iterable[object]], None]] = deque[object](maxlen=0).extend
"""Run an iterator to its end, in C (the ``itertools`` recipe)."""


def parse_sequence(text: object, *, what: str, length: int | None, limit: int = 0) -> list[Token]:
    """Decode a value sequence into exactly ``length`` tokens (or at most ``limit`` when
    ``length`` is ``None``)."""
    return parse_sequence_span(text, what=what, length=length, limit=limit)[0]


def parse_sequence_span(
    text: object, *, what: str, length: int | None, limit: int = 0
) -> tuple[list[Token], int | None, int | None]:
    """:func:`parse_sequence`, with the smallest and the largest integer token (``None`` when
    every token is ``~``), found per item rather than by a scan of the expanded tokens: a
    ``rowClass`` of a few hundred runs is checked against the class count in a few hundred
    steps, not twenty thousand."""
    if type(text) is not str:
        raise DecodeError("type", f"{what} must be a string, got {type_name(text)}")
    bound = limit if length is None else length
    out: list[Token] = []
    ends: list[int] = []  # each item's least and greatest integer token
    if not text:
        items: list[str] = []
    else:
        items = text.split(",")
    if len(items) <= bound and _all_plain(text, items):
        plain = list(map(int, items))  # every item a plain number: no run to expand
        tokens = cast(list[Token], plain)  # a list of ints is a list of tokens (read-only)
        return _checked_length(tokens, what=what, length=length), min(plain), max(plain)
    append = out.append
    extend = out.extend
    for number, item in enumerate(items):
        if _plain(item):
            if len(out) >= bound:
                _overflow(what, length=length, limit=limit)
            value = int(item)
            append(value)
            ends.append(value)
            continue
        match = _ITEM.fullmatch(item)
        if match is None:
            raise DecodeError(
                "range_syntax", f"{what} item {number + 1} {describe(item)} is not well formed"
            )
        lo = match.group("lo")
        if lo is not None:
            start, end = int(lo), int(match.group("hi"))
            if end < start:
                raise DecodeError(
                    "range_syntax", f"{what} item {number + 1} {describe(item)} runs backwards"
                )
            if len(out) + (end - start + 1) > bound:
                _overflow(what, length=length, limit=limit)
            extend(range(start, end + 1))
            ends += (start, end)
            continue
        raw = match.group("value")
        if raw == "-0":
            raise DecodeError("range_syntax", f"{what} item {number + 1} '-0' is not well formed")
        token: Token = None if raw == ABSENT else int(raw)
        count_text = match.group("count")
        count = 1 if count_text is None else int(count_text)
        if len(out) + count > bound:
            _overflow(what, length=length, limit=limit)
        if count == 1:
            append(token)
        else:
            extend([token] * count)
        if token is not None:
            ends.append(token)
    checked = _checked_length(out, what=what, length=length)
    return (checked, min(ends), max(ends)) if ends else (checked, None, None)


def _checked_length(out: list[Token], *, what: str, length: int | None) -> list[Token]:
    if length is not None and len(out) != length:
        raise DecodeError(
            "coverage", f"{what} holds {len(out)} values for {length} entries: some are missing"
        )
    return out


def mark_ranges(text: object, *, what: str, marks: bytearray) -> list[tuple[int, int]]:
    """Decode a range set of positions below ``len(marks)``, marking each one in ``marks``.

    A position already marked (by this set or an earlier one) is named twice: ``coverage``.
    Returns the ranges as inclusive ``(start, end)`` pairs in the order written.
    """
    if type(text) is not str:
        raise DecodeError("type", f"{what} must be a string, got {type_name(text)}")
    size = len(marks)
    if not text:
        raise DecodeError("range_syntax", f"{what} is empty")
    items = text.split(",")
    if _plain_items(text, items):
        # Single positions only (the common case: replaced Instances), checked with C-level
        # scans; anything wrong is named by the loop below.
        positions = list(map(int, items))
        if (
            max(positions) < size
            and len(set(positions)) == len(positions)
            and not any(map(marks.__getitem__, positions))
        ):
            _consume(map(marks.__setitem__, positions, repeat(1)))
            return list(zip(positions, positions, strict=True))
    ranges: list[tuple[int, int]] = []
    for number, item in enumerate(items):
        if _plain(item):
            start = end = int(item)
        else:
            match = _RANGE.fullmatch(item)
            if match is None:
                raise DecodeError(
                    "range_syntax", f"{what} item {number + 1} {describe(item)} is not a range"
                )
            start = int(match.group("lo"))
            end = int(match.group("hi"))
            if end < start:
                raise DecodeError(
                    "range_syntax", f"{what} item {number + 1} {describe(item)} runs backwards"
                )
        if end >= size:
            raise DecodeError("coverage", f"{what} names row {end}, past the last row {size - 1}")
        if marks.find(1, start, end + 1) != -1:
            twice = marks.index(1, start, end + 1)
            raise DecodeError("coverage", f"{what} covers row {twice} a second time")
        marks[start : end + 1] = b"\x01" * (end - start + 1)
        ranges.append((start, end))
    return ranges


def _overflow(what: str, *, length: int | None, limit: int) -> None:
    if length is None:
        raise DecodeError("bounds", f"{what} holds more than {limit} values")
    raise DecodeError("coverage", f"{what} holds more values than its {length} entries")


# -- Writing ---------------------------------------------------------------------------------


def format_sequence(tokens: Sequence[Token]) -> str:
    """The shortest spelling :func:`parse_sequence` reads back as ``tokens`` (greedy: repeats
    first, then ascending runs of three or more)."""
    if len(tokens) >= _FEW_RUNS_FROM:
        runs = _few_runs(tokens, limit=len(tokens) // 32)
        if runs is not None:  # a column of a few long runs: the usual one
            return format_runs(runs)
    first = tokens[0] if tokens else None
    if first is not None and first >= 0 and len(tokens) >= 3:
        last = first + len(tokens) - 1
        if tokens[-1] == last and tokens == list(range(first, last + 1)):
            return f"{first}-{last}"  # one ascending run: an index column, usually
    if len(tokens) > 16 and None not in tokens:
        steps = list(map(sub, tokens[1:], tokens[:-1]))
        if 0 not in steps and 1 not in steps:
            return ",".join(map(str, tokens))  # no run at all: every value differs
    parts: list[str] = []
    add = parts.append
    singles: list[int | None] = []
    # Where each run of equal tokens starts, found at C speed: a loop per run, not per token.
    n = len(tokens)
    starts = [0, *compress(range(1, n), map(ne, islice(tokens, 1, None), tokens)), n] if n else []
    if len(starts) == n + 1:  # no two neighbours equal: every token is a single
        singles = list(tokens)
        _flush(singles, add)
        return ",".join(parts)
    for start, end in pairwise(starts):
        value = tokens[start]
        count = end - start
        if count > 1:
            _flush(singles, add)
            add(f"{ABSENT if value is None else value}*{count}")
        else:
            singles.append(value)
    _flush(singles, add)
    return ",".join(parts)


_FEW_RUNS_FROM: Final = 64


def _few_runs(tokens: Sequence[Token], *, limit: int) -> list[tuple[Token, int]] | None:
    """``(value, count)`` of each run of equal tokens, in order, when there are at most
    ``limit`` runs; else None. ``groupby`` compares the tokens in C (a loop per run): four
    times faster than finding where each run starts, for a column of a few runs, and given
    up early for a column of many."""
    runs: list[tuple[Token, int]] = []
    add = runs.append
    for value, group in groupby(tokens):
        add((value, len(list(group))))
        if len(runs) > limit:
            return None
    return runs


def format_runs(runs: Sequence[tuple[Token, int]]) -> str:
    """:func:`format_sequence` of ``value`` repeated ``count`` times for each
    ``(value, count)`` in ``runs`` (neighbouring runs hold different values), without
    expanding them."""
    parts: list[str] = []
    add = parts.append
    singles: list[int | None] = []
    for value, count in runs:
        if count > 1:
            _flush(singles, add)
            add(f"{ABSENT if value is None else value}*{count}")
        else:
            singles.append(value)
    _flush(singles, add)
    return ",".join(parts)


def _flush(singles: list[int | None], emit: Callable[[str], object]) -> None:
    """Emit ``singles`` (then empty it): ascending runs of three or more as ranges, the rest
    one by one."""
    n = len(singles)
    if n > 8 and None not in singles and min(cast(list[int], singles)) >= 0:
        # Every token a number: the runs end where a step isn't +1, found at C speed (a loop
        # per run, not per token). The same spelling as the loop below.
        values = cast(list[int], singles)
        ends = [
            0,
            *compress(range(1, n), map(ne, map(sub, islice(values, 1, None), values), repeat(1))),
            n,
        ]
        for i, j in pairwise(ends):
            if j - i >= 3:
                emit(f"{values[i]}-{values[j - 1]}")
            else:
                for k in range(i, j):
                    emit(str(values[k]))
        singles.clear()
        return
    i = 0
    while i < n:
        value = singles[i]
        if value is None:
            emit(ABSENT)
            i += 1
            continue
        j = i + 1
        if value >= 0:
            expected = value + 1
            while j < n and singles[j] == expected:
                j += 1
                expected += 1
        if j - i >= 3:
            emit(f"{value}-{singles[j - 1]}")
        else:
            for k in range(i, j):
                emit(str(singles[k]))
        i = j
    singles.clear()


def format_ranges(positions: Sequence[int]) -> str:
    """A range set for ascending, distinct ``positions``."""
    if 1 not in map(sub, positions[1:], positions[:-1]):
        return ",".join(map(str, positions))  # no two neighbours: single positions only
    parts: list[str] = []
    n = len(positions)
    i = 0
    while i < n:
        j = i + 1
        while j < n and positions[j] == positions[j - 1] + 1:
            j += 1
        parts.append(str(positions[i]) if j - i == 1 else f"{positions[i]}-{positions[j - 1]}")
        i = j
    return ",".join(parts)
