"""Instance indexes as the short ranges the commands print: ``0-2, 4, 7-9``.

Why one module: ``kubectl ome instance plan`` (the Instances a batch defers) and the status
repair report (the indexes a replacement holds) print the same lists of indexes, and a reader
comparing the two outputs should see one notation.

Invariant: the text names every index once, in ascending order; consecutive indexes fold
into ``first-last``; an empty list is the empty string.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["index_ranges"]


def index_ranges(indexes: Iterable[int]) -> str:
    """``[5, 1, 2, 3]`` -> ``1-3, 5``; duplicates count once; ``[]`` -> ``""``."""
    spans: list[str] = []
    ordered = sorted(set(indexes))
    if not ordered:
        return ""
    start = previous = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        spans.append(str(start) if start == previous else f"{start}-{previous}")
        if value is not None:
            start = previous = value
    return ", ".join(spans)
