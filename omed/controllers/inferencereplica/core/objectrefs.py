"""How the core names an existing object: by name and uid, in the cache's views of pods,
ControllerRevisions and PodGroups and in the actions that write them.

Why one home: a write to an object the cache showed carries its uid as a precondition, so an
older decision never touches a newer object of the same name. Nothing here decides.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """An existing object by name and uid."""

    name: str
    uid: str
    """A write to the object carries it, so a newer object of the name is never touched."""
