"""What a relist tells the handlers: the difference between the cache and a fresh list.

After a watch breaks beyond resuming (410 Gone), the reflector lists again and the cache is
replaced by the list. Events that happened in between were never seen, so they are derived
here, as pure functions of (what the cache held, what the list says):

- a key only in the list is an add;
- a key in both is an update when its ``resourceVersion`` differs (an unchanged object
  is not redelivered: level-triggered controllers gain nothing from it);
- a key only in the cache was deleted meanwhile: its delete is delivered with a
  :class:`DeletedFinalStateUnknown` tombstone, which holds the last known state;
- a key in both whose ``uid`` differs was deleted and recreated meanwhile: a tombstone
  delete for the old object, then an add for the new one (client-go reports an update
  here; a handler that tracks expectations by UID must see the old UID go).

Invariant: applying the diff's events in order (deletes, then adds and updates) to the old
cache yields exactly the list, so no delete is ever lost across a relist.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from omed.informers.transform import Obj


class DeletedFinalStateUnknown(dict[str, Any]):
    """A delete seen only through a relist: the object's last known state, and its key.

    It is a ``dict`` (a copy of the last known object) so that handlers read it like any
    object; ``isinstance(obj, DeletedFinalStateUnknown)`` tells that the final state, and
    the moment of the delete, are unknown.
    """

    __slots__ = ("key",)

    def __init__(self, key: str, obj: Obj) -> None:
        super().__init__(obj)
        self.key = key

    def __repr__(self) -> str:
        return f"DeletedFinalStateUnknown({self.key!r})"


@dataclasses.dataclass(frozen=True, slots=True)
class RelistDiff:
    """Events that turn the old cache into the listed state, in delivery order."""

    deleted: list[DeletedFinalStateUnknown]
    added: list[Obj]
    updated: list[tuple[Obj, Obj]]

    def __bool__(self) -> bool:
        return bool(self.deleted or self.added or self.updated)


def _meta(obj: Obj, field: str) -> Any:
    metadata = obj.get("metadata")
    return metadata.get(field) if isinstance(metadata, dict) else None


def relist_diff(old: Mapping[str, Obj], new: Mapping[str, Obj]) -> RelistDiff:
    """The events between the cache ``old`` and the listed ``new`` (both key -> object)."""
    deleted: list[DeletedFinalStateUnknown] = []
    added: list[Obj] = []
    updated: list[tuple[Obj, Obj]] = []
    for key, before in old.items():
        if key not in new:
            deleted.append(DeletedFinalStateUnknown(key, before))
    for key, after in new.items():
        before_or_none = old.get(key)
        if before_or_none is None:
            added.append(after)
            continue
        if _meta(before_or_none, "uid") != _meta(after, "uid"):
            deleted.append(DeletedFinalStateUnknown(key, before_or_none))
            added.append(after)
        elif _meta(before_or_none, "resourceVersion") != _meta(after, "resourceVersion"):
            updated.append((before_or_none, after))
    return RelistDiff(deleted=deleted, added=added, updated=updated)
