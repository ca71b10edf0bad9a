"""A function of a replica's rows (or facts), answered again for the very same objects.

Why: several of a pass's aggregates (the summary's counts, the revisions its rows name, the
rows late for a deadline or a grace) read one or two fields of every row, and a pass over
20,000 rows that changed nothing read them all again: about a fifth of such a pass. Rows,
facts and pod views are immutable values that the pass memos (:mod:`.rows`, :mod:`.observe`)
hand out again while nothing changed, so "the same objects in the same order" is checked by
identity, at C speed (well under a millisecond for 20,000), and answers for them what the
function answered before.

A pass where a few rows or pods changed can be answered from the entry before too, through a
``patch``: given that entry (its objects and result), the new objects, the positions where
they differ (every sequence of the same length as before, a few positions changed, equal
``values``), it returns the result for the new objects, or None when it can't tell (then
``fn`` runs).

Invariant: :meth:`SameMemo.get` returns what ``fn(*objects, *values)`` returns, for an ``fn``
that reads nothing but its arguments and never changes them (and whose result the caller
doesn't change), and a ``patch`` that answers what ``fn`` would or None. An entry is used
only for the very same objects (by identity, each entry holding them, so no id is reused)
and equal ``values``; it is a cost, never another result, when one is dropped. Each replica
keeps its last ``per_replica`` entries; at most ``max_objects`` objects are held in all, the
replicas asked least recently dropped first.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from itertools import compress, count
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_Entry = tuple[tuple[tuple[object, ...], ...], tuple[Hashable, ...], object]
Patch = Callable[..., "T | None"]
"""``patch(old_objects, old_result, new_objects, changed_positions, *values)``."""


class SameMemo(Generic[T]):
    """``fn`` per replica, reused for the very same objects and equal values."""

    def __init__(
        self,
        fn: Callable[..., T],
        *,
        patch: Patch[T] | None = None,
        per_replica: int = 2,
        max_objects: int = 400_000,
    ) -> None:
        self._fn = fn
        self._patch = patch
        self._per_replica = per_replica
        self._max = max_objects
        self._replicas: OrderedDict[str, list[_Entry]] = OrderedDict()
        self._held = 0
        _ALL.append(self)

    def get(
        self, uid: str, objects: Sequence[Sequence[object]], values: tuple[Hashable, ...] = ()
    ) -> T:
        """``fn(*objects, *values)``: each of ``objects`` a sequence compared by identity,
        element by element; ``values`` compared by equality."""
        held = tuple(tuple(sequence) for sequence in objects)
        entries = self._replicas.pop(uid, None) or []
        for pos, (key, key_values, result) in enumerate(entries):
            if key_values == values and _same(key, held):
                if pos:
                    entries.insert(0, entries.pop(pos))
                self._replicas[uid] = entries
                return result  # type: ignore[return-value]
        found = self._patched(entries, held, values)
        if found is None:
            found = self._fn(*held, *values)
        entries.insert(0, (held, values, found))
        self._held += _weight(held)
        for dropped in entries[self._per_replica :]:
            self._held -= _weight(dropped[0])
        del entries[self._per_replica :]
        self._replicas[uid] = entries
        while self._held > self._max and self._replicas:
            _, gone = self._replicas.popitem(last=False)
            self._held -= sum(_weight(entry[0]) for entry in gone)
        return found

    def _patched(
        self,
        entries: list[_Entry],
        held: tuple[tuple[object, ...], ...],
        values: tuple[Hashable, ...],
    ) -> T | None:
        """The result for ``held`` patched from the latest entry of equal values whose
        sequences have the lengths of ``held``'s, when few positions changed; else None."""
        if self._patch is None:
            return None
        for key, key_values, result in entries:
            if key_values != values or len(key) != len(held):
                continue
            if any(len(x) != len(y) for x, y in zip(key, held, strict=True)):
                continue
            changed: set[int] = set()
            for x, y in zip(key, held, strict=True):
                changed.update(compress(count(), map(operator.is_not, x, y)))
            longest = max(map(len, held), default=0)
            if len(changed) * 8 > longest:
                return None
            return self._patch(key, result, held, sorted(changed), *values)
        return None

    def forget(self, uid: str) -> None:
        gone = self._replicas.pop(uid, None) or []
        self._held -= sum(_weight(entry[0]) for entry in gone)


_ALL: list[SameMemo[Any]] = []


def forget_all(uid: str) -> None:
    """Drop what every memo keeps of the replica ``uid`` (it is gone)."""
    for memo in _ALL:
        memo.forget(uid)


def _same(a: tuple[tuple[object, ...], ...], b: tuple[tuple[object, ...], ...]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(map(operator.is_, x, y)) for x, y in zip(a, b, strict=True)
    )


def _weight(held: tuple[tuple[object, ...], ...]) -> int:
    return sum(map(len, held))


__all__ = ["SameMemo", "forget_all"]
