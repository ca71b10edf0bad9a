"""The one seam through which the controller reads and writes Instance rows.

Why: rows are stored either as the list ``status.instanceStatuses`` (DenseV1) or as columns
(``instanceStatusEncoding: ColumnarV2``, :mod:`omed.statuscodec`). The controller must not
care which: it reads rows only through :func:`decode_rows_from_status` (and, per pass, through
:data:`ROWS`) and writes them only through :func:`encode_rows_into_status`. Both forms are read
through the codec under the manager's bound; which form a write uses is decided by
:mod:`.encoding`, which the executor applies to the list that :func:`encode_rows_into_status`
gives.

Why per class: a stored status is a few kinds of row repeated (the codec's classes; a list's
rows grouped by content), and a ColumnarV2 status of 6.6 KB can hold 20,000 rows of 32
conditions. Validating every row into its own model cost 14 s of CPU and 1 GiB for that one;
so each distinct row (class) is validated once, and each row is a shallow copy of its class's
model with its ``index`` set, sharing the class's nested models (conditions, lastFailure,
operation), or the class's model itself where the class is one row's: a 20,000-row fleet
costs one validation per class plus at most a copy per row. What the
codec admits is bounded by rows x cells (:mod:`omed.statuscodec.cells`), so no status makes
this unbounded. :data:`ROWS` keeps the rows of each InferenceReplica's last read version, so a
pass that finds the same resourceVersion (a pod event) validates nothing.

Invariants:

* decode then encode of an unchanged row list gives back the same JSON (rows sorted by
  index, unset fields left out), so a pass that changes nothing writes nothing;
* a status whose rows can't be read raises :class:`RowsUnreadable`, never returns a partial
  list: acting on half the rows would delete or duplicate Instances;
* decoded rows are read-only: their nested models (and their set of fields) are shared by the
  rows of a class, and kept across passes by :data:`ROWS`. Change a row with
  ``model_copy(update=...)``, never by assigning to it or to what it holds.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, islice, repeat
from operator import attrgetter, is_not, lt, setitem
from types import MappingProxyType
from typing import Any, Final

import orjson
from pydantic import TypeAdapter, ValidationError

from omed.api.inferencereplica import InferenceReplicaStatus, InstanceStatus, RowCondition
from omed.statuscodec import ClassTable, DecodeError, DecodeReason, decode_status_table
from omed.statuscodec.timestamps import CANONICAL_TIME


class RowsUnreadable(Exception):
    """The stored rows can't be decoded; the InferenceReplica must be left alone."""


class StatusDecodeFailed(RowsUnreadable):
    """The codec refused the stored rows: ``reason`` is the event's ``(<reason>)``."""

    def __init__(
        self, reason: DecodeReason, detail: str, *, row: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: DecodeReason = reason
        self.detail = detail
        self.row = row
        """The decoded row the InstanceStatus model refused (``row_shape`` only), for
        reports that name it; ``None`` when the codec refused the status."""


def decode_rows_from_status(
    status: Mapping[str, Any] | None, *, max_rows: int | None = None
) -> list[InstanceStatus]:
    """The rows stored in ``status`` (a JSON status object), sorted by index.

    Either form; ``max_rows`` bounds ColumnarV2 (maxDecodedInstances; ``None`` or 0: no bound
    is set, so no columns are decoded). Raises :class:`StatusDecodeFailed`: the codec's reason,
    or ``row_shape`` for a decoded row the InstanceStatus model refuses (the codec accepts any
    string as a time, the model doesn't; the first such row in stored order is named).

    This is the one definition of "the stored status can be decoded": the manager reads every
    InferenceReplica through it (:data:`ROWS`, under the same bound), and
    ``ome-status-preflight`` calls it for its fleet check and for ``repair``, so the tool and
    the manager can't disagree on which statuses are damaged, or why.
    """
    return _decode(status, max_rows=max_rows)[0]


def _decode(
    status: Mapping[str, Any] | None, *, max_rows: int | None
) -> tuple[list[InstanceStatus], int]:
    """:func:`decode_rows_from_status`, and the models the rows hold (each row, and each
    class's nested models, shared by its rows): what keeping them costs."""
    if not status:
        return [], 0
    with collector_paused():
        try:
            table = decode_status_table(status, max_rows=max_rows or None)
        except DecodeError as err:
            raise StatusDecodeFailed(err.reason, err.detail) from err
        rows = _rows(table)
    templates = table.templates
    nested = sum(map(len, filter(None, map(dict.get, templates, repeat("conditions")))))
    nested += sum(map(dict.__contains__, templates, repeat("lastFailure")))
    nested += sum(map(dict.__contains__, templates, repeat("operation")))
    return rows, len(rows) + nested


def _rows(table: ClassTable) -> list[InstanceStatus]:
    """The rows of ``table`` as models sorted by index: each class validated once (in the order
    of its first row), each row a copy of its class's model with its index (:func:`_with_indexes`).
    A ``readySince`` in the controller's own form is read without the model
    (:func:`_ready_since`), each distinct string once.

    The classes are validated in one call (:data:`_CLASSES`), not one call each: the loop over
    them stays in pydantic-core. If any is refused, the first refused class in that order is
    validated on its own, so the error (and its message) is the one that class gives alone."""
    used = list(dict.fromkeys(table.row_class))  # classes by their first row, in C
    templates = table.templates
    validated: list[InstanceStatus] = []
    shared: dict[bytes, list[RowCondition]] = {}
    json_of: dict[int, bytes] = {}
    parsed: dict[object, dt.datetime | None] = {None: None}  # a class without one
    try:
        for start in range(0, len(used), _CHUNK):
            chunk = used[start : start + _CHUNK]
            bodies = _bodies(templates, chunk, shared, json_of)
            since = _ready_since(templates, chunk, parsed)
            _consume(map(setitem, compress(bodies, since), repeat("readySince"), repeat(None)))
            made = _CLASSES.validate_python(bodies)
            given = map(_fields, compress(made, since))
            _consume(map(setitem, given, repeat("ready_since"), filter(None, since)))
            validated += made
    except ValidationError as err:
        position = start + min(
            (e["loc"][0] for e in err.errors() if e["loc"] and type(e["loc"][0]) is int),
            default=0,
        )
        cls = used[position]
        body = templates[cls]
        try:
            InstanceStatus.model_validate({"index": 0, **body})
        except ValidationError as alone:
            index = table.indexes[table.row_class.index(cls)]
            raise StatusDecodeFailed(
                "row_shape",
                f"a row is not a valid Instance row: {alone}",
                row={"index": index, **body},
            ) from alone
        raise  # pragma: no cover - the class the list refused is refused alone too
    models: list[InstanceStatus] = [_FIRST] * len(templates)
    for cls, model in zip(used, validated, strict=True):
        models[cls] = model
    row_class, indexes = table.row_class, table.indexes
    if not _ascending(indexes):  # every index is an int here (decode_status_table checks)
        numbers: list[int] = indexes  # type: ignore[assignment]
        order = sorted(range(len(numbers)), key=numbers.__getitem__)
        row_class = [row_class[p] for p in order]
        indexes = [indexes[p] for p in order]
    return _with_indexes(models, row_class, indexes)


_CLASSES: Final = TypeAdapter(list[InstanceStatus])
"""Validates a status's classes (their templates, each with index 0) in one call."""
_CONDITION_LISTS: Final = TypeAdapter(list[list[RowCondition]])
_CHUNK: Final = 1024
"""Classes validated per call: the bodies of a chunk exist at once, not those of every
class (20,000 of them would be some 30 MiB more at the peak)."""


def _bodies(
    templates: Sequence[Mapping[str, Any]],
    used: Sequence[int],
    shared: dict[bytes, list[RowCondition]],
    json_of: dict[int, bytes],
) -> list[dict[str, Any]]:
    """What :data:`_CLASSES` validates: each used class's template with index 0, its
    ``conditions`` already validated, each distinct list of them once (``shared``: those
    validated so far, by their JSON).

    Why: classes that differ in one field (each Instance Ready at its own second) mostly hold
    equal conditions, and validating those is half the cost of a class. The shared models are
    taken as they are (``revalidate_instances`` is ``never``), and decoded rows share nested
    models anyway. Lists are told apart by their exact JSON (``orjson``: type-exact, ``1`` is
    not ``true``), each list object's JSON made once (``json_of``, by identity: the codec
    gives classes with equal conditions the very same list, and the templates hold every list
    while a status is read, so an id is not reused). If any list of them is refused, or isn't
    JSON, the templates are given as they are, so the refusal (and its message) is the one the
    class's own validation gives."""
    keys: list[bytes | None] = []
    distinct: dict[bytes, Any] = {}
    try:
        for cls in used:
            listed = templates[cls].get("conditions")
            if type(listed) is list and listed:
                key = json_of.get(id(listed))
                if key is None:
                    key = json_of[id(listed)] = orjson.dumps(listed)
                if key not in shared:
                    distinct.setdefault(key, listed)
                keys.append(key)
            else:
                keys.append(None)
        if distinct:
            shared.update(
                zip(
                    distinct, _CONDITION_LISTS.validate_python(list(distinct.values())), strict=True
                )
            )
    except (TypeError, orjson.JSONEncodeError, ValidationError):
        return [{"index": 0, **templates[cls]} for cls in used]
    return [
        {"index": 0, **templates[cls]}
        if key is None
        else {"index": 0, **templates[cls], "conditions": shared[key]}
        for cls, key in zip(used, keys, strict=True)
    ]


def _ready_since(
    templates: Sequence[dict[str, Any]],
    used: Sequence[int],
    parsed: dict[object, dt.datetime | None],
) -> list[dt.datetime | None]:
    """Each used class's ``readySince`` as the model holds it, where it is a time in the one
    form this controller writes (:func:`canonical_time`), else ``None`` (the model validates
    it, as it validates every other field).

    Why: classes that differ in one field mostly differ in this one (each Instance Ready at
    its own second), and the model's time validation (a parse, then
    :func:`omed.api.base._normalize_time` in Python, a copy) was the larger part of each
    class's cost. ``parsed`` holds each distinct string's value across a decode's chunks, so
    each is parsed once. :func:`_rows` gives the model ``None`` for these and sets the value
    after: the set of fields is the same (the key is there either way)."""
    texts = list(map(dict.get, map(templates.__getitem__, used), repeat("readySince")))
    try:
        fresh = [text for text in dict.fromkeys(texts) if text not in parsed]
    except TypeError:  # a value that isn't JSON's (unhashable): the model judges them all
        return [None] * len(texts)
    parsed.update(zip(fresh, canonical_times(fresh), strict=True))
    return list(map(parsed.__getitem__, texts))


def canonical_times(texts: list[object]) -> list[dt.datetime | None]:
    """``list(map(canonical_time, texts))``, in C-level passes where every one of ``texts`` is
    a time in the canonical form (the usual case: the controller wrote them all)."""
    try:
        if all(map(CANONICAL_TIME.fullmatch, texts)):  # type: ignore[arg-type]
            return list(map(dt.datetime.fromisoformat, texts))  # type: ignore[arg-type]
    except (TypeError, ValueError):  # one is no string, or names no instant
        pass
    return list(map(canonical_time, texts))


def canonical_time(text: object) -> dt.datetime | None:
    """``text`` as a :data:`~omed.api.base.Time` holds it, if it is a string, a time in the form
    ``metav1.Time`` is written in (``2026-09-14T20:52:31Z``: whole seconds, UTC) and names a
    real instant; else ``None``, for the model to judge.

    The invariant: wherever this gives a value, ``TypeAdapter(Time)`` accepts ``text`` and
    gives an equal value with the same ``tzinfo`` (``datetime.UTC``), so using it in place of
    the model's validation accepts nothing the model refuses (checked by hypothesis over
    strings of this shape and near it: ``test_irep_status_times.py``). The shape is pinned
    first (ASCII digits, ``T``, ``Z``) because ``fromisoformat`` alone reads forms the model
    refuses (week dates, other separators)."""
    if type(text) is not str or CANONICAL_TIME.fullmatch(text) is None:
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:  # a date or time of day that doesn't exist: the model refuses it too
        return None


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection while a status is decoded and its rows made (and, in the
    shell, while a pass is decided and its status encoded): they are tens of thousands of new
    objects, none of them cyclic garbage (what a pass drops is freed by reference counting),
    and the collections their allocation triggers walk the manager's heap, its caches
    included, again and again (half of a 20,000-class decode, a third of a 20,000-Instance
    pass). What is made is bounded by the codec's cell bound and the replica's Instances; the
    collector is on again at the end, whatever happens. (The codec itself leaves the collector
    alone: it is pure.)"""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_FIRST: Final = InstanceStatus(index=0)
"""A placeholder for a class no row uses (never returned)."""
_new = object.__new__
_set = object.__setattr__
_fields: Final = attrgetter("__dict__")


def _with_indexes(
    models: Sequence[InstanceStatus], row_class: list[int], indexes: list[Any]
) -> list[InstanceStatus]:
    """Each row: a new model whose fields are its class's model's (``models[row_class[p]]``),
    but ``index`` (``indexes[p]``).

    What pydantic's ``model_copy(update={"index": index})`` makes (an equal model, with equal
    JSON), at a fraction of its cost: the field values (nested models included) and the set of
    fields are the class model's own, shared, not copied (decoded rows are read-only). Every
    step is one C-level pass over the rows (``map`` of ``dict.copy``, ``operator.setitem``,
    ``object.__setattr__``): no Python code runs per row. Where each class is one row's (each
    Instance Ready at its own second), the class models themselves are the rows, their
    ``index`` set in place: no copy at all."""
    if len(row_class) == len(models) and len(set(row_class)) == len(models):
        # every class is one row's: its model is that row's, given its index in place (the
        # class models are this decode's own, held by nothing else)
        own = list(map(models.__getitem__, row_class))
        _consume(map(setitem, map(_fields, own), repeat("index"), indexes))
        return own
    fields = [model.__dict__ for model in models]
    fields_set = [model.__pydantic_fields_set__ for model in models]
    dicts: list[dict[str, Any]] = list(map(dict.copy, map(fields.__getitem__, row_class)))
    _consume(map(setitem, dicts, repeat("index"), indexes))
    rows: list[InstanceStatus] = list(map(_new, repeat(InstanceStatus, len(dicts))))
    _consume(map(_set, rows, repeat("__dict__"), dicts))
    _consume(
        map(_set, rows, repeat("__pydantic_fields_set__"), map(fields_set.__getitem__, row_class))
    )
    _consume(map(_set, rows, repeat("__pydantic_extra__"), repeat(None)))
    _consume(map(_set, rows, repeat("__pydantic_private__"), repeat(None)))
    return rows


_consume: Final[Callable[[Iterable[Any]], None]] = deque(maxlen=0).extend
"""Run an iterator to its end, in C (the ``itertools`` recipe)."""


def _ascending(values: Sequence[Any]) -> bool:
    return all(map(lt, values, islice(values, 1, None)))


Rows = Mapping[int, InstanceStatus]
"""A replica's rows by index (read-only)."""


@dataclass(slots=True)
class _Read:
    version: str
    status: object
    """The status object read: the informer cache's, never changed while it is cached."""
    bound: int | None
    rows: Rows
    weight: int
    """The models the rows hold (rows, and their classes' nested models)."""
    written: bool = False
    """The status is the very JSON this controller last wrote (:meth:`RowsCache.wrote`)."""


@dataclass(slots=True)
class _Written:
    status: Mapping[str, Any]
    bound: int | None
    rows: Rows
    weight: int


_WRITES_KEPT: Final = 16


class RowsCache:
    """The rows each InferenceReplica held at the version last read, validated once.

    Why: a pass runs on every event of the replica and of each of its pods, and most find the
    replica at the version the last one read; its rows are then the same, and so are their
    models. Keyed by uid; an entry is used only for the same resourceVersion *and* the very
    status object it was read from (the informer cache holds one object per version and never
    changes it), so a status built by hand with a version seen before is read afresh. At most
    ``max_models`` models are kept (rows, and their classes' nested models: about 0.7 KiB
    each, so some 70 MiB), the least recently read replicas dropped first; a replica whose
    rows alone hold more is read afresh on every pass (the pass still gets its rows:
    :meth:`take`), and a replica whose status can't be read keeps nothing.
    """

    def __init__(self, *, max_models: int = 100_000) -> None:
        self._max_models = max_models
        self._reads: OrderedDict[str, _Read] = OrderedDict()
        self._held = 0
        self._handed: tuple[str, _Read] | None = None
        self._written: OrderedDict[str, _Written] = OrderedDict()
        """Replica uid -> its last status write (:meth:`wrote`), until the next read of it."""
        """The last read, kept or not, until the pass that read it takes it
        (:meth:`take`)."""

    def read(self, irep: Mapping[str, Any], *, max_rows: int | None) -> Rows:
        """The rows of ``irep`` (a cached JSON object) under ``max_rows``; raises
        :class:`StatusDecodeFailed` as :func:`decode_rows_from_status` does."""
        uid, version, status = _identity(irep)
        read = self._reads.get(uid)
        if (
            read is not None
            and read.status is status
            and read.version == version
            and read.bound == max_rows
        ):
            self._reads.move_to_end(uid)
            return read.rows
        self.forget(uid)
        self._handed = None
        written = self._written.pop(uid, None)
        if written is not None and written.bound == max_rows and written.status == status:
            read = _Read(version, status, max_rows, written.rows, written.weight, written=True)
        else:
            models, weight = _decode(status, max_rows=max_rows)
            read = _Read(version, status, max_rows, _by_index(models), weight)
        self._handed = (uid, read)
        if read.weight <= self._max_models:
            self._keep(uid, read)
        return read.rows

    def wrote(
        self,
        uid: str,
        status: Mapping[str, Any],
        rows: Sequence[InstanceStatus],
        *,
        max_rows: int | None,
    ) -> None:
        """The controller stored ``status`` (the JSON it sent), holding ``rows``, for the
        replica ``uid``: the next version :meth:`read` finds, if its status is that very JSON
        (equal, whatever the order of its keys), holds these rows.

        Why: a write's own version comes back through the watch as a new object, and reading
        it afresh validated every row again (at 20,000 distinct rows, about a second) to find
        the rows just written. A status is a function of its rows and the codec is
        deterministic: equal JSON decodes to rows equal to these (the codec's round trip, and a
        write never stores rows its writer can't read again under its bound). A status the
        API server changed in any way (a defaulted or pruned field) is read afresh. One
        write is kept per replica, the last; at most :data:`_WRITES_KEPT` replicas'."""
        self._written.pop(uid, None)
        by_index = _by_index(rows)
        # Per row: 1, its conditions, its lastFailure and its operation (C-level passes).
        weight = (
            3 * len(rows)
            + sum(map(len, filter(None, map(_CONDITIONS, rows))))
            - list(map(_LAST_FAILURE, rows)).count(None)
            - list(map(_OPERATION, rows)).count(None)
        )
        self._written[uid] = _Written(status, max_rows, by_index, weight)
        while len(self._written) > _WRITES_KEPT:
            self._written.popitem(last=False)

    def is_own_write(self, irep: Mapping[str, Any]) -> bool:
        """Whether :meth:`read` found this very object's status to be the JSON this
        controller last wrote for the replica (equal, whatever the order of its keys)."""
        uid, version, status = _identity(irep)
        read = self._reads.get(uid)
        if read is None or read.status is not status or read.version != version:
            handed = self._handed
            if handed is None or handed[0] != uid:
                return False
            read = handed[1]
            if read.status is not status or read.version != version:
                return False
        return read.written

    def last_read(self, irep: Mapping[str, Any]) -> Rows | None:
        """The rows :meth:`read` gave for this very object (any bound), if it keeps them."""
        uid, version, status = _identity(irep)
        read = self._reads.get(uid)
        if read is None or read.status is not status or read.version != version:
            return None
        return read.rows

    def take(self, irep: Mapping[str, Any]) -> Rows | None:
        """The rows :meth:`read` gave for this very object: the last read (handed over once,
        kept or not), else one it keeps; ``None`` for an object it didn't read."""
        uid, version, status = _identity(irep)
        handed, self._handed = self._handed, None
        if handed is not None:
            handed_uid, read = handed
            if handed_uid == uid and read.status is status and read.version == version:
                return read.rows
        return self.last_read(irep)

    def forget(self, uid: str) -> None:
        read = self._reads.pop(uid, None)
        if read is not None:
            self._held -= read.weight

    def __len__(self) -> int:
        return len(self._reads)

    def _keep(self, uid: str, read: _Read) -> None:
        self._reads[uid] = read
        self._held += read.weight
        while self._held > self._max_models:
            _, dropped = self._reads.popitem(last=False)
            self._held -= dropped.weight


def _identity(irep: Mapping[str, Any]) -> tuple[str, str, Any]:
    meta = irep.get("metadata") or {}
    return str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""), irep.get("status")


def _by_index(rows: Iterable[InstanceStatus]) -> Rows:
    listed = list(rows)
    return MappingProxyType(dict(zip(map(_INDEX, listed), listed, strict=True)))


_INDEX: Final = attrgetter("index")
_CONDITIONS: Final = attrgetter("conditions")
_LAST_FAILURE: Final = attrgetter("last_failure")
_OPERATION: Final = attrgetter("operation")


ROWS: Final = RowsCache()
"""The controller's cache of validated rows (one controller per process)."""


def encode_rows_into_status(
    status: Mapping[str, Any], rows: Sequence[InstanceStatus]
) -> dict[str, Any]:
    """A copy of ``status`` (JSON) holding ``rows`` in the stored form."""
    encoded = {
        k: v
        for k, v in status.items()
        if k not in ("instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns")
    }
    if rows:
        ordered = rows if _ascending(list(map(_INDEX, rows))) else sorted(rows, key=_row_index)
        encoded["instanceStatuses"] = ROW_JSON.many(ordered)
    return encoded


def _row_index(row: InstanceStatus) -> int:
    return row.index


class RowJson:
    """The JSON of each row model (``to_dict``), made once per model.

    Why: every status write encodes every row, and so does each pass's check of the stored
    form; at 20,000 rows that was 20,000 model dumps for a write that changes one row. Rows
    are read-only (see the module's invariants), so a model's JSON never changes: an entry is
    used for the very same model (by identity; the entry holds it, so its id can't be
    reused). At most ``max_rows`` are kept, the least recently used dropped first. The JSON
    given is shared: it must be read, never changed.
    """

    def __init__(self, *, max_rows: int = 100_000, lists: int = 4) -> None:
        self._max_rows = max_rows
        self._rows: OrderedDict[int, tuple[InstanceStatus, dict[str, Any]]] = OrderedDict()
        self._lists: list[tuple[tuple[InstanceStatus, ...], list[dict[str, Any]]]] = []
        self._lists_kept = lists

    def many(self, rows: Sequence[InstanceStatus]) -> list[dict[str, Any]]:
        """``[self.of(row) for row in rows]``, a new list: from a list it gave before for as
        many rows, where the rows at a position are the very same (by identity, at C speed;
        the entry holds them), so only the rows at other positions are looked up.

        Why: a write of 20,000 rows that changes one looked every row up here (a tenth of the
        write). Each of the last ``lists`` lists is kept, at most ``max_rows`` rows in all."""
        held = tuple(rows)
        for pos, (before, bodies) in enumerate(self._lists):
            if len(before) == len(held):
                found = list(bodies)
                for changed in compress(count(), map(is_not, held, before)):
                    found[changed] = self.of(held[changed])
                del self._lists[pos]
                break
        else:
            found = list(map(self.of, held))
        self._lists.insert(0, (held, found))
        del self._lists[self._lists_kept :]
        while sum(len(before) for before, _ in self._lists) > self._max_rows:
            self._lists.pop()
        return list(found)

    def of(self, row: InstanceStatus) -> dict[str, Any]:
        entry = self._rows.get(id(row))
        if entry is not None and entry[0] is row:
            self._rows.move_to_end(id(row))
            return entry[1]
        body = row.to_dict()
        self._rows[id(row)] = (row, body)
        if len(self._rows) > self._max_rows:
            self._rows.popitem(last=False)
        return body


ROW_JSON: Final = RowJson()
"""The controller's memo of row JSON (one controller per process)."""


def status_summary(status: Mapping[str, Any] | None) -> InferenceReplicaStatus:
    """The status without its rows, as a model (rows are read by the decoder only)."""
    if not status:
        return InferenceReplicaStatus()
    rest = {
        k: v
        for k, v in status.items()
        if k not in ("instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns")
    }
    try:
        return InferenceReplicaStatus.model_validate(rest)
    except ValidationError as err:
        raise RowsUnreadable(f"invalid status: {err}") from err


def status_body(status: InferenceReplicaStatus, rows: Sequence[InstanceStatus]) -> dict[str, Any]:
    """The JSON status to store: ``status`` (its own rows ignored) with ``rows`` encoded in."""
    return encode_rows_into_status(status.to_dict(), rows)


def in_list_form(irep: Mapping[str, Any], *, max_rows: int | None) -> Mapping[str, Any]:
    """Read ``irep``'s rows under ``max_rows`` (into :data:`ROWS`) and return ``irep``.

    The planner's reader (``observe``) then takes the validated rows from :data:`ROWS`, one
    form whatever is stored, without decoding or validating them again; the cached object is
    never changed. Raises :class:`StatusDecodeFailed`. (The name is from when this gave the
    object with its rows as a list, decoded again by ``observe``.)
    """
    ROWS.read(irep, max_rows=max_rows)
    return irep


def observed_rows(irep: Mapping[str, Any]) -> Rows:
    """``irep``'s rows for the planner: what :func:`in_list_form` read, or, for an object it
    didn't read (tests, lists), decoded now with no bound (a list needs none)."""
    rows = ROWS.take(irep)
    if rows is not None:
        return rows
    return _by_index(decode_rows_from_status(irep.get("status")))
