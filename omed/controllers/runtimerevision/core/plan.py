"""The one decision of the runtime revision controller, for one runtime name:
(observed, settings, now) -> :class:`~omed.controllers.runtimerevision.core.model.Plan`.

Snapshots. Each live runtime of the name has a revision of its current spec; one is created
when none has its content hash, numbered one past the highest ``revision`` of that runtime
(1 for the first). A spec changed back to an earlier one reuses that revision.

In use. A revision is in use when

* it is the revision of a live runtime's current spec (it would only be written again);
* an InferenceService pins it: ``spec.runtime.revision`` or ``status.pinnedRevisionName``;
* an InferenceService names the runtime and renders from it: the revision of the current
  spec of the runtime it resolves to (``kind`` as given; unset: a ServingRuntime in its
  namespace, else the ClusterServingRuntime), or, that runtime deleted, its newest revision,
  the spec its pods were last rendered from.

Collection (the invariant the property tests hold). Of the revisions that omed wrote
(``ome.io/created-by: ome-controller``), the ``retention`` newest of the name (by creation
time, then ``revision``, then name) and every revision in use are kept, and lose their
``ome.io/gc-eligible-since`` mark if they have one. Every other one is marked with ``now``
(RFC 3339, UTC, whole seconds) when it has no mark that reads as a time, and deleted once
``now`` is ``grace_period`` past its mark. A revision in use is never marked or deleted; a
revision omed didn't write is never touched. The plan's ``requeue_after`` is the time to
the earliest deadline still ahead, so nothing polls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from omed.api.base import format_time
from omed.api.constants import KIND_CLUSTER_SERVING_RUNTIME, KIND_SERVING_RUNTIME
from omed.controllers.runtimerevision.core.model import (
    Create,
    Delete,
    Mark,
    Observed,
    Plan,
    Revision,
    ServiceUse,
    Settings,
    Skipped,
    Source,
    Unmark,
)
from omed.controllers.runtimerevision.core.observe import parse_time
from omed.controllers.runtimerevision.core.snapshot import (
    content_hash,
    revision_body,
    revision_name,
    unwritable,
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def newest_first(revisions: Iterable[Revision]) -> list[Revision]:
    return sorted(revisions, key=lambda r: (r.created or _EPOCH, r.number, r.name), reverse=True)


def _resolve(service: ServiceUse, name: str, live: set[Source], known: set[Source]) -> Source:
    """The runtime a service that names ``name`` renders from."""
    namespaced = Source(KIND_SERVING_RUNTIME, service.namespace, name)
    cluster = Source(KIND_CLUSTER_SERVING_RUNTIME, "", name)
    if service.runtime_kind == KIND_CLUSTER_SERVING_RUNTIME:
        return cluster
    if service.runtime_kind == KIND_SERVING_RUNTIME:
        return namespaced
    for candidate in (namespaced, cluster):
        if candidate in live:
            return candidate
    return namespaced if namespaced in known else cluster


def plan(observed: Observed, settings: Settings, now: dt.datetime) -> Plan:
    name = observed.runtime_name
    by_name = {r.name: r for r in observed.revisions}
    by_source: dict[Source, list[Revision]] = {}
    for rev in observed.revisions:
        if rev.source is not None:
            by_source.setdefault(rev.source, []).append(rev)

    creates: list[Create] = []
    skipped: list[Skipped] = []
    current: dict[Source, str] = {}
    for runtime in sorted(observed.runtimes, key=lambda r: r.source):
        source = runtime.source
        digest = content_hash(runtime.spec)
        why = unwritable(source, digest)
        if why is not None:
            skipped.append(Skipped(source, why))
            continue
        wanted = revision_name(source, digest)
        current[source] = wanted
        if wanted not in by_name:
            number = 1 + max((r.number for r in by_source.get(source, ())), default=0)
            body = revision_body(
                source=source,
                spec=runtime.spec,
                digest=digest,
                number=number,
                namespace=observed.namespace,
            )
            creates.append(Create(source, body))

    in_use: set[str] = set(current.values())
    live = {r.source for r in observed.runtimes}
    for service in observed.services:
        in_use.update(service.pins)
        if service.runtime_name != name:
            continue
        source = _resolve(service, name, live, set(by_source))
        if source in current:
            in_use.add(current[source])
        elif by_source.get(source):
            in_use.add(newest_first(by_source[source])[0].name)
    in_use &= set(by_name) | {c.name for c in creates}

    ours = newest_first(r for r in observed.revisions if r.written_by_ome)
    newest = {r.name for r in ours[: max(settings.retention, 0)]}
    stamp = format_time(now)
    unmarks: list[Unmark] = []
    marks: list[Mark] = []
    deletes: list[Delete] = []
    deadlines: list[dt.datetime] = []
    for rev in ours:
        if rev.name in newest or rev.name in in_use:
            if rev.mark is not None:
                unmarks.append(Unmark(rev))
            continue
        since = parse_time(rev.mark)
        if since is None:
            marks.append(Mark(rev, stamp))
            deadlines.append((parse_time(stamp) or now) + settings.grace_period)
            continue
        deadline = since + settings.grace_period
        if now >= deadline:
            deletes.append(Delete(rev))
        else:
            deadlines.append(deadline)
    wait = min(deadlines, default=None)
    return Plan(
        creates=tuple(creates),
        unmarks=tuple(unmarks),
        marks=tuple(marks),
        deletes=tuple(deletes),
        skipped=tuple(skipped),
        in_use=frozenset(in_use),
        newest=frozenset(newest),
        requeue_after=None if wait is None else max(wait - now, dt.timedelta(0)),
    )
