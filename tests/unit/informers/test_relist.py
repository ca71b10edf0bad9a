"""The relist diff: every vanished object gets a delete, nothing unchanged is redelivered."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from omed.informers.relist import DeletedFinalStateUnknown, RelistDiff, relist_diff
from omed.informers.store import object_key
from omed.informers.transform import Obj

from ._support import pod


def keyed(*objects: Obj) -> dict[str, Obj]:
    return {object_key(o): o for o in objects}


def test_adds_updates_deletes_and_unchanged() -> None:
    old = keyed(pod("kept", 1), pod("changed", 1), pod("gone", 1))
    new = keyed(pod("kept", 1), pod("changed", 2), pod("born", 3))
    diff = relist_diff(old, new)
    assert [t.key for t in diff.deleted] == ["ns/gone"]
    tombstone = diff.deleted[0]
    assert isinstance(tombstone, DeletedFinalStateUnknown)
    assert tombstone == pod("gone", 1)  # the last known state, readable as an object
    assert repr(tombstone) == "DeletedFinalStateUnknown('ns/gone')"
    assert [o["metadata"]["name"] for o in diff.added] == ["born"]
    assert [(a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"])
            for a, b in diff.updated] == [("1", "2")]  # fmt: skip
    assert diff


def test_recreated_under_the_same_name_is_a_delete_then_an_add() -> None:
    old = keyed(pod("p", 1, uid="first"))
    new = keyed(pod("p", 5, uid="second"))
    diff = relist_diff(old, new)
    assert [t["metadata"]["uid"] for t in diff.deleted] == ["first"]
    assert [o["metadata"]["uid"] for o in diff.added] == ["second"]
    assert diff.updated == []


def test_nothing_changed_is_an_empty_diff() -> None:
    same = keyed(pod("a", 1), pod("b", 2))
    diff = relist_diff(same, dict(same))
    assert diff == RelistDiff(deleted=[], added=[], updated=[])
    assert not diff


states = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", "e", "f"]),
    st.tuples(st.sampled_from(["u1", "u2"]), st.integers(1, 4)),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(states, states)
def test_applying_the_diff_yields_the_list(
    before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]]
) -> None:
    old = keyed(*(pod(n, rv, uid=uid) for n, (uid, rv) in before.items()))
    new = keyed(*(pod(n, rv, uid=uid) for n, (uid, rv) in after.items()))
    diff = relist_diff(old, new)
    cache = dict(old)
    for tombstone in diff.deleted:  # delivery order: deletes, then adds, then updates
        assert cache.pop(tombstone.key) == tombstone
    for obj in diff.added:
        assert object_key(obj) not in cache
        cache[object_key(obj)] = obj
    for previous, current in diff.updated:
        assert cache[object_key(current)] is previous
        cache[object_key(current)] = current
    # Unchanged objects (same uid and resourceVersion) are the only ones not delivered.
    assert {k: v["metadata"] for k, v in cache.items()} == {
        k: v["metadata"] for k, v in new.items()
    }
    delivered = len(diff.deleted) + len(diff.added) + len(diff.updated)
    unchanged = sum(1 for k in new if k in old and old[k] == new[k])
    assert delivered >= len(new) - unchanged
