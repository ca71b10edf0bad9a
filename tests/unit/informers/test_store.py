"""The indexed store: lookups by key and by index stay exact through every mutation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omed.informers.indexers import (
    INFERENCE_SERVICE,
    INSTANCE,
    NAMESPACE,
    OWNER_UID,
    POD_INDEXERS,
    label_index,
)
from omed.informers.store import IndexedStore, object_key, split_key
from omed.informers.transform import Obj

from ._support import pod


def labelled(name: str, rv: int, *, isvc: str, index: int, namespace: str = "ns") -> Obj:
    return pod(
        name,
        rv,
        namespace=namespace,
        labels={
            "ome.io/inferenceservice": isvc,
            "component": "engine",
            "ome.io/instance-index": str(index),
        },
    )


def test_keys_are_namespace_slash_name_or_name() -> None:
    assert object_key(pod("a", 1, namespace="prod")) == "prod/a"
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert split_key("prod/a") == ("prod", "a")
    assert split_key("node-1") == (None, "node-1")


def test_get_list_keys_and_delete() -> None:
    store = IndexedStore()
    a, b = pod("a", 1), pod("b", 2, namespace="other")
    assert store.upsert(a) == ("ns/a", None)
    assert store.upsert(b) == ("other/b", None)
    newer = pod("a", 3)
    assert store.upsert(newer) == ("ns/a", a)
    assert store.get("ns/a") is newer
    assert store.get_object(pod("a", 0)) is newer
    assert sorted(store.keys()) == ["ns/a", "other/b"]
    assert len(store.list()) == 2 and len(store) == 2
    assert "other/b" in store
    assert store.delete(b) == ("other/b", b)
    assert store.delete(b) == ("other/b", None)
    assert store.keys() == ["ns/a"]


def test_pod_indexes_follow_label_changes() -> None:
    store = IndexedStore(indexers=POD_INDEXERS)
    store.upsert(labelled("p0", 1, isvc="chat", index=0))
    store.upsert(labelled("p1", 1, isvc="chat", index=1))
    store.upsert(labelled("q0", 1, isvc="chat", index=0, namespace="dev"))
    assert store.index_keys(NAMESPACE, "ns") == ["ns/p0", "ns/p1"]
    assert store.index_keys(INFERENCE_SERVICE, "ns/chat") == ["ns/p0", "ns/p1"]
    assert store.index_keys(INFERENCE_SERVICE, "dev/chat") == ["dev/q0"]
    assert [o["metadata"]["name"] for o in store.by_index(INSTANCE, "ns/chat/engine/1")] == ["p1"]

    # p1 moves to Instance 0 of another InferenceService: both indexes follow.
    store.upsert(labelled("p1", 2, isvc="other", index=0))
    assert store.index_keys(INFERENCE_SERVICE, "ns/chat") == ["ns/p0"]
    assert store.index_keys(INFERENCE_SERVICE, "ns/other") == ["ns/p1"]
    assert store.index_keys(INSTANCE, "ns/chat/engine/1") == []
    assert "ns/chat/engine/1" not in store.index_values(INSTANCE)

    store.delete_key("ns/p0")
    assert store.index_keys(INFERENCE_SERVICE, "ns/chat") == []
    assert store.index_keys(NAMESPACE, "ns") == ["ns/p1"]


def test_owner_uid_index_holds_every_owner() -> None:
    store = IndexedStore(indexers={OWNER_UID: POD_INDEXERS[OWNER_UID]})
    owned = pod("a", 1)
    owned["metadata"]["ownerReferences"] = [{"uid": "u1"}, {"uid": "u2"}]
    store.upsert(owned)
    store.upsert(pod("b", 1))
    assert store.index_keys(OWNER_UID, "u1") == ["ns/a"]
    assert store.index_keys(OWNER_UID, "u2") == ["ns/a"]
    assert store.index_values(OWNER_UID) == ["u1", "u2"]


def test_unknown_index_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="no index named 'nope'"):
        IndexedStore().by_index("nope", "x")


def test_indexers_added_late_index_what_is_stored() -> None:
    store = IndexedStore()
    store.upsert(pod("a", 1, labels={"team": "x"}))
    store.upsert(pod("b", 1, labels={"team": "y"}))
    team = label_index("team")
    store.add_indexers({"team": team})
    assert store.index_keys("team", "ns/x") == ["ns/a"]
    store.add_indexers({"team": team})  # the same function again is fine
    with pytest.raises(ValueError, match="already registered"):
        store.add_indexers({"team": label_index("team")})


def test_replace_rebuilds_everything() -> None:
    store = IndexedStore(indexers=POD_INDEXERS)
    store.upsert(labelled("p0", 1, isvc="chat", index=0))
    before = store.view()
    fresh = labelled("p9", 5, isvc="new", index=9)
    store.replace({"ns/p9": fresh})
    assert store.keys() == ["ns/p9"]
    assert store.index_keys(INFERENCE_SERVICE, "ns/chat") == []
    assert store.index_keys(INSTANCE, "ns/new/engine/9") == ["ns/p9"]
    assert list(before) == ["ns/p0"]  # the old view still shows the old contents


# -- property: indexes always equal a rebuild from scratch ----------------------------------

names = st.sampled_from(["a", "b", "c", "d", "e"])
services = st.sampled_from(["chat", "embed"])
namespaces = st.sampled_from(["ns", "dev"])
operations = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete", "replace"]),
        names,
        namespaces,
        services,
        st.integers(0, 2),
    ),
    max_size=40,
)


def _expected(objects: list[Obj]) -> dict[str, dict[str, list[str]]]:
    result: dict[str, dict[str, list[str]]] = {}
    for index, func in POD_INDEXERS.items():
        table: dict[str, list[str]] = {}
        for obj in objects:
            for value in func(obj):
                table.setdefault(value, []).append(object_key(obj))
        result[index] = {value: sorted(keys) for value, keys in table.items()}
    return result


@settings(max_examples=200, deadline=None)
@given(operations)
def test_indexes_always_match_a_rebuild(ops: list[tuple[str, str, str, str, int]]) -> None:
    store = IndexedStore(indexers=POD_INDEXERS)
    for rv, (op, name, namespace, isvc, instance) in enumerate(ops):
        obj = labelled(name, rv, isvc=isvc, index=instance, namespace=namespace)
        if op == "upsert":
            store.upsert(obj)
        elif op == "delete":
            store.delete(obj)
        else:
            store.replace({object_key(obj): obj})
    expected = _expected(store.list())
    for index in POD_INDEXERS:
        actual = {value: store.index_keys(index, value) for value in store.index_values(index)}
        assert actual == expected[index]
