"""The informer's cache: objects by key, and secondary indexes over them.

Controllers read the cache instead of the API server: ``get`` by ``namespace/name``,
``list``, and ``by_index`` for "the pods of this InferenceService" or "the pods of Instance
7" without scanning every pod. client-go's ``thread_safe_store.go`` is the model; there are
no locks because every reader and the one writer (the informer) run on the same event loop,
and no method awaits.

Invariants:

- after every mutation, each index maps exactly the values its function returns for the
  stored objects to their keys, and nothing else (an index entry never outlives the object
  version that produced it);
- the store never holds an object older than one it has delivered to a handler: the
  informer updates the store first and only then calls handlers, from the same synchronous
  step;
- stored objects are shared with every reader and must not be mutated (see
  :mod:`omed.informers.transform`).

An index value that maps to one key holds the key itself rather than a one-element set:
most instance-index values name one pod, and a set costs ~200 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from omed.informers.transform import Obj

KeyFunc = Callable[[Obj], str]
IndexFunc = Callable[[Obj], Sequence[str]]
"""Returns the index values of an object (empty when the object is not indexed)."""


def object_key(obj: Obj) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's key)."""
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    name: str = metadata["name"]
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> tuple[str | None, str]:
    """The inverse of :func:`object_key`: ``(namespace or None, name)``."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, namespace)


_Bucket = str | set[str]
_Keys = list[str]
_Objects = list[Obj]


class IndexedStore:
    """Objects by key plus named indexes; see the module docstring for the invariants."""

    __slots__ = ("_index_funcs", "_indices", "_items", "_key_func", "_pairs")

    def __init__(
        self,
        *,
        key_func: KeyFunc = object_key,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> None:
        self._key_func = key_func
        self._items: dict[str, Obj] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        self._indices: dict[str, dict[str, _Bucket]] = {}
        # (function, its index) for the hot path; rebuilt whenever an index dict is replaced.
        self._pairs: list[tuple[IndexFunc, dict[str, _Bucket]]] = []
        if indexers:
            self.add_indexers(indexers)

    # -- reading -----------------------------------------------------------------------------
    def key_of(self, obj: Obj) -> str:
        return self._key_func(obj)

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def get_object(self, obj: Obj) -> Obj | None:
        """The stored version of ``obj`` (same key), if any."""
        return self._items.get(self._key_func(obj))

    def list(self) -> _Objects:
        return list(self._items.values())

    def keys(self) -> _Keys:
        return list(self._items)

    def view(self) -> Mapping[str, Obj]:
        """A read-only view of key -> object (it keeps showing this version after a replace)."""
        return MappingProxyType(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def indexers(self) -> _Keys:
        return list(self._index_funcs)

    def index_keys(self, index: str, value: str) -> _Keys:
        """Keys of the objects whose ``index`` function returned ``value``."""
        bucket = self._index(index).get(value)
        if bucket is None:
            return []
        if type(bucket) is str:
            return [bucket]
        return sorted(bucket)

    def by_index(self, index: str, value: str) -> _Objects:
        """Objects whose ``index`` function returned ``value`` (ordered by key)."""
        items = self._items
        return [items[key] for key in self.index_keys(index, value)]

    def index_values(self, index: str) -> _Keys:
        """Every value ``index`` currently holds."""
        return list(self._index(index))

    def _index(self, name: str) -> dict[str, _Bucket]:
        try:
            return self._indices[name]
        except KeyError:
            raise KeyError(f"no index named {name!r}") from None

    # -- writing (the informer only) ---------------------------------------------------------
    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register more indexes; existing objects are indexed at once."""
        for name, func in indexers.items():
            existing = self._index_funcs.get(name)
            if existing is not None:
                if existing is not func:
                    raise ValueError(f"index {name!r} is already registered")
                continue
            self._index_funcs[name] = func
            index: dict[str, _Bucket] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in func(obj):
                    _bucket_add(index, value, key)
            self._pairs.append((func, index))

    def upsert(self, obj: Obj) -> tuple[str, Obj | None]:
        """Store ``obj``; return its key and the version it replaced (None when new)."""
        key = self._key_func(obj)
        items = self._items
        old = items.get(key)
        items[key] = obj
        if old is None:
            for func, index in self._pairs:
                for value in func(obj):
                    if value in index:
                        _bucket_add(index, value, key)
                    else:
                        index[value] = key
        elif self._pairs:
            self._reindex(key, old, obj)
        return key, old

    def delete(self, obj: Obj) -> tuple[str, Obj | None]:
        """Remove the object with ``obj``'s key; return the key and the removed version."""
        key = self._key_func(obj)
        return key, self.delete_key(key)

    def delete_key(self, key: str) -> Obj | None:
        old = self._items.pop(key, None)
        if old is not None and self._pairs:
            self._reindex(key, old, None)
        return old

    def replace(self, items: dict[str, Obj]) -> None:
        """Make the store hold exactly ``items`` (key -> object), rebuilding every index.

        The store takes ownership of the mapping.
        """
        self._items = items
        self._pairs = []
        for name, func in self._index_funcs.items():
            index: dict[str, _Bucket] = {}
            for key, obj in items.items():
                for value in func(obj):
                    _bucket_add(index, value, key)
            self._indices[name] = index
            self._pairs.append((func, index))

    def _reindex(self, key: str, old: Obj, new: Obj | None) -> None:
        for func, index in self._pairs:
            old_values: Sequence[str] = func(old)
            new_values: Sequence[str] = func(new) if new is not None else ()
            if old_values == new_values:
                continue
            for value in old_values:
                if value not in new_values:
                    _bucket_remove(index, value, key)
            for value in new_values:
                if value not in old_values:
                    _bucket_add(index, value, key)


def _bucket_add(index: dict[str, _Bucket], value: str, key: str) -> None:
    bucket = index.get(value)
    if bucket is None:
        index[value] = key
    elif type(bucket) is str:
        if bucket != key:
            index[value] = {bucket, key}
    else:
        bucket.add(key)  # type: ignore[union-attr]


def _bucket_remove(index: dict[str, _Bucket], value: str, key: str) -> None:
    bucket = index.get(value)
    if bucket is None:
        return
    if type(bucket) is str:
        if bucket == key:
            del index[value]
        return
    bucket.discard(key)  # type: ignore[union-attr]
    if len(bucket) == 1:
        index[value] = next(iter(bucket))
    elif not bucket:
        del index[value]
