"""From cached JSON to the planner's dataclasses: the cache boundary.

Why: the informer caches hold JSON dicts shared between readers (never to be mutated); the
planner wants small immutable facts. This module reads each pod once into a
:class:`~.model.PodView`, the InferenceReplica into a :class:`~.model.ReplicaTarget`, and its
rows (through the :mod:`.status` seam) into an :class:`~.model.ObservedState`.

Invariants:

* only pods whose *controller* owner reference is this InferenceReplica (by uid) are its
  pods; a pod merely labelled like them is someone else's and is never touched here (one
  that no controller owns, named and labelled as this InferenceReplica's, may be adopted
  first: :mod:`.orphans`);
* a pod without a valid ``ome.io/instance-index`` is a stray: reported apart, never counted
  in an Instance;
* failure facts follow the kubelet's words: a container waiting in ``CrashLoopBackOff``,
  ``ImagePullBackOff``/``ErrImagePull`` (reported as ImagePullBackOff, so an image that
  alternates between the two doesn't churn the row), ``CreateContainerConfigError``,
  ``CreateContainerError``, ``InvalidImageName`` or ``RunContainerError`` is failing, as is
  a pod in phase Failed; a crash reports the termination's own reason and exit code (as
  ``kubectl ome instance status`` shows ``reason=Error``);
* a pod runs its spec's images when every container's status names the spec's image
  (:mod:`.images`), or, where a status can't tell, the kubelet observed the pod's
  generation: what an in-place Update waits for besides Ready;
* a pod's stall (stuck in a terminal waiting reason, or Unschedulable) carries the time it
  is measured from, read off the pod's own stamps (creation, condition transitions), so a
  grace (:mod:`.graces`) runs on the same clock for every pass and every leader.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import operator
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count
from typing import Any, Final

from pydantic import ValidationError

from omed.api.constants import (
    ANNOTATION_RELEASE_HELD_REVISION,
    KIND_INFERENCE_REPLICA,
    KIND_INFERENCE_SERVICE,
    LABEL_COMPONENT,
    LABEL_INCARNATION,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
    LABEL_REVISION_HASH,
    LEGACY_LABEL_INCARNATION,
    LEGACY_LABEL_REVISION,
    READINESS_GATE_SERVING,
)
from omed.api.inferencereplica import InferenceReplica, InstanceStatus
from omed.api.lifecycle import Lifecycle
from omed.api.revision import is_revision_hash, revision_name
from omed.clock import parse_rfc3339
from omed.config.lifecycle import LifecycleConfig
from omed.controllers.deletion import FINALIZER_ORPHAN
from omed.controllers.inferencereplica.core.images import same_image
from omed.controllers.inferencereplica.core.model import (
    ContainerFailure,
    ObservedState,
    ParentRef,
    PodStall,
    PodView,
    ReplicaTarget,
    RunnerShape,
)
from omed.controllers.inferencereplica.core.names import (
    ANNOTATION_OPERATION_ID,
    FINALIZER,
    parse_pod_name,
)
from omed.controllers.inferencereplica.core.policy import revision_history_limit, update_policy
from omed.controllers.inferencereplica.core.revisions import (
    LegacyTranslation,
    RevisionView,
    legacy_translation,
    resolve_revision,
    revision_views,
)
from omed.controllers.inferencereplica.core.samememo import SameMemo
from omed.controllers.inferencereplica.core.status import observed_rows, status_summary
from omed.controllers.owners import controller_uid

FAILING_WAITING_REASONS: Final = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "InvalidImageName",
        "RunContainerError",
    }
)
_IMAGE_PULL: Final = frozenset({"ImagePullBackOff", "ErrImagePull"})
STUCK_WAITING_REASONS: Final = FAILING_WAITING_REASONS | {"ErrImageNeverPull", "ImageInspectError"}
"""The kubelet's waiting reasons that no wait resolves (upstream OME's terminal set, plus the
kubelet's two other image reasons): a pod parked in one past ``stuckPodGracePeriod`` fails
its attempt (:mod:`.graces`)."""


class InvalidReplica(Exception):
    """The InferenceReplica's spec can't be read (the schema should have refused it)."""


def _int(value: Any) -> int | None:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def api_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 timestamp of an object read from the API (None when absent or unreadable:
    a cache never trusts a field's shape)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None


def _failure(pod: Mapping[str, Any]) -> tuple[bool, ContainerFailure | None]:
    status = pod.get("status") or {}
    statuses = [
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    ]
    pod_failed = status.get("phase") == "Failed"
    current: ContainerFailure | None = None
    last: ContainerFailure | None = None
    for container in statuses:
        name = str(container.get("name") or "")
        state = container.get("state") or {}
        terminated_before = (container.get("lastState") or {}).get("terminated") or {}
        waiting = state.get("waiting") or {}
        reason = waiting.get("reason")
        if current is None and reason in FAILING_WAITING_REASONS:
            if reason in _IMAGE_PULL:
                current = ContainerFailure(name, "ImagePullBackOff")
            elif reason == "CrashLoopBackOff" and terminated_before:
                current = ContainerFailure(
                    name,
                    str(terminated_before.get("reason") or reason),
                    terminated_before.get("exitCode"),
                    api_time(terminated_before.get("finishedAt")),
                )
            else:
                current = ContainerFailure(name, str(reason))
        terminated = state.get("terminated") or {}
        if current is None and pod_failed and terminated and terminated.get("exitCode") != 0:
            current = ContainerFailure(
                name,
                str(terminated.get("reason") or "Error"),
                terminated.get("exitCode"),
                api_time(terminated.get("finishedAt")),
            )
        if last is None and terminated_before and terminated_before.get("exitCode") != 0:
            last = ContainerFailure(
                name,
                str(terminated_before.get("reason") or "Error"),
                terminated_before.get("exitCode"),
                api_time(terminated_before.get("finishedAt")),
            )
    if current is None and pod_failed:
        current = ContainerFailure("", str(status.get("reason") or "Failed"))
    return current is not None, current or last


def _stall(pod: Mapping[str, Any], conditions: Mapping[str, Any]) -> PodStall | None:
    """The pod's stall (:class:`~.model.PodStall`): a container, init containers first, waiting
    in a terminal reason, or PodScheduled False with reason Unschedulable. A pod without the
    time it would be measured from (no creation stamp, no transition time) proves no
    duration and shows none."""
    status = pod.get("status") or {}
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        since = api_time(scheduled.get("lastTransitionTime"))
        if since is None:
            return None
        return PodStall(
            "Unschedulable", "Unschedulable", since, message=str(scheduled.get("message") or "")
        )
    for container in (
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    ):
        reason = ((container.get("state") or {}).get("waiting") or {}).get("reason")
        if reason not in STUCK_WAITING_REASONS:
            continue
        since = api_time((pod.get("metadata") or {}).get("creationTimestamp"))
        if since is None:
            return None
        unready = conditions.get("ContainersReady") or {}
        left_ready = api_time(unready.get("lastTransitionTime"))
        if unready.get("status") != "True" and left_ready is not None:
            since = max(since, left_ready)
        return PodStall(
            "Stuck",
            "ImagePullBackOff" if reason in _IMAGE_PULL else str(reason),
            since,
            container=str(container.get("name") or ""),
        )
    return None


def runs_spec_images(pod: Mapping[str, Any]) -> bool:
    """Every container's status reports the image its spec names (see :mod:`.images`).

    Where a status can't tell (it shows a digest only, or the container has no status
    yet), the kubelet must have observed the pod's generation; a pod (or a kubelet) that
    reports no generation is taken at its word.
    """
    statuses = {
        str(c.get("name") or ""): str(c.get("image") or "")
        for c in (pod.get("status") or {}).get("containerStatuses") or ()
    }
    unsure = False
    for container in (pod.get("spec") or {}).get("containers") or ():
        wanted = str(container.get("image") or "")
        running = statuses.get(str(container.get("name") or ""))
        same = None if not running or not wanted else same_image(wanted, running)
        if same is False:
            return False
        unsure = unsure or same is None
    if not unsure:
        return True
    generation = (pod.get("metadata") or {}).get("generation")
    observed = (pod.get("status") or {}).get("observedGeneration")
    if not isinstance(generation, int) or not isinstance(observed, int):
        return True
    return observed >= generation


def pod_revision(labels: Mapping[str, Any]) -> str | None:
    """The full revision name of a pod: from ``ome.io/revision-hash`` and the pod's identity
    labels, else (a pod made before upstream's labels) its ``ome.io/revision``."""
    digest = labels.get(LABEL_REVISION_HASH)
    isvc, component = labels.get(LABEL_INFERENCE_SERVICE), labels.get(LABEL_COMPONENT)
    if isinstance(digest, str) and is_revision_hash(digest) and isvc and component:
        return revision_name(isvc=str(isvc), component=str(component), digest=digest)
    legacy = labels.get(LEGACY_LABEL_REVISION)
    return str(legacy) if legacy is not None else None


def pod_view(pod: Mapping[str, Any], *, replica: str) -> PodView:
    """What the planner needs of one pod; ``index`` is -1 for a stray."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    index = _int(labels.get(LABEL_INSTANCE_INDEX))
    name = str(metadata.get("name") or "")
    parsed = parse_pod_name(name, replica=replica, index=index) if index is not None else None
    conditions = {str(c.get("type")): c for c in (pod.get("status") or {}).get("conditions") or ()}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    gate = (conditions.get(READINESS_GATE_SERVING) or {}).get("status")
    failing, failure = _failure(pod)
    scheduled = conditions.get("PodScheduled") or {}
    ready_condition = conditions.get("Ready") or {}
    return PodView(
        name=name,
        uid=str(metadata.get("uid") or ""),
        index=-1 if index is None else index,
        runner=parsed[0] if parsed else None,
        ordinal=parsed[1] if parsed else None,
        incarnation=_int(labels.get(LABEL_INCARNATION, labels.get(LEGACY_LABEL_INCARNATION))),
        revision=pod_revision(labels),
        operation_id=annotations.get(ANNOTATION_OPERATION_ID),
        resource_version=str(metadata.get("resourceVersion") or ""),
        terminating=bool(metadata.get("deletionTimestamp")),
        deleted_at=api_time(metadata.get("deletionTimestamp")),
        finalizers=tuple(str(f) for f in metadata.get("finalizers") or ()),
        removed=bool(metadata.get("deletionTimestamp"))
        and metadata.get("deletionGracePeriodSeconds") == 0
        and not metadata.get("finalizers"),
        node=(pod.get("spec") or {}).get("nodeName") or None,
        phase=(pod.get("status") or {}).get("phase"),
        ready=ready,
        ready_since=api_time(conditions["Ready"].get("lastTransitionTime")) if ready else None,
        containers_ready=(conditions.get("ContainersReady") or {}).get("status") == "True",
        serving=None if gate is None else gate == "True",
        failing=failing,
        failure=failure,
        restarts=sum(
            int(c.get("restartCount") or 0)
            for c in (pod.get("status") or {}).get("containerStatuses") or ()
        ),
        images=tuple(
            (str(c.get("name") or ""), str(c.get("image") or ""))
            for c in (pod.get("spec") or {}).get("containers") or ()
        ),
        runs_spec_images=runs_spec_images(pod),
        unschedulable=scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable",
        node_lost=(
            ready_condition.get("status") != "True"
            and ready_condition.get("reason") == "NodeNotReady"
        )
        or (pod.get("status") or {}).get("reason") == "NodeLost",
        stall=_stall(pod, conditions),
    )


class PodViewCache:
    """Each replica's pods as :func:`pod_view` read them, by the very cached object.

    Why: a pass runs on every event of the replica and of each of its pods, and reads every
    pod of the replica; at 20,000 pods that read was a third of a pass that changed nothing.
    A cached pod object is one version of one pod and never changes (the informer replaces
    it), so its view is a function of the object (and the replica's name and uid): an entry is
    used only for the same object (by identity; the entry holds it, so its id can't be
    reused), and a new version is read afresh. Each pass keeps exactly the views of the pods
    it was given, so a replica holds no view of a pod that is gone; at most ``max_views``
    views are kept, the replicas read least recently dropped first.

    Invariant: :meth:`views` gives what reading every pod afresh gives.
    """

    def __init__(self, *, max_views: int = 100_000) -> None:
        self._max_views = max_views
        self._replicas: OrderedDict[tuple[str, str], _Views] = OrderedDict()
        self._held = 0

    def views(self, target: ReplicaTarget, pods: Iterable[Mapping[str, Any]]) -> list[PodView]:
        """The views of the pods in ``pods`` that ``target`` controls, in their order.

        The pods of the pass before at the same positions (the very same objects: an
        informer's index lists its objects in a stable order) take their views from there, so
        a pass where one pod changed reads one pod; otherwise each pod is looked up by
        identity."""
        key = (target.uid, target.name)
        given = tuple(pods)
        last = self._replicas.pop(key, None)
        if last is not None:
            self._held -= len(last.by_id)
        if last is not None and len(last.pods) == len(given):
            changed = list(compress(count(), map(operator.is_not, given, last.pods)))
            if not changed:
                kept = last
            elif len(changed) * 8 <= len(given):  # a few changed: patch the last views
                by_id = dict(last.by_id)
                views = list(last.views)
                for pos in changed:
                    by_id.pop(id(last.pods[pos]), None)
                for pos in changed:
                    entry = self._entry(target, given[pos], last.by_id)
                    by_id[id(given[pos])] = entry
                    views[pos] = entry[1]
                kept = _Views(given, views, by_id)
            else:
                kept = self._read(target, given, last.by_id)
        else:
            kept = self._read(target, given, last.by_id if last is not None else {})
        if len(kept.by_id) <= self._max_views:
            self._replicas[key] = kept
            self._held += len(kept.by_id)
            while self._held > self._max_views:
                _, dropped = self._replicas.popitem(last=False)
                self._held -= len(dropped.by_id)
        return [view for view in kept.views if view is not None]

    def _read(
        self,
        target: ReplicaTarget,
        pods: tuple[Mapping[str, Any], ...],
        old: Mapping[int, tuple[object, PodView | None]],
    ) -> _Views:
        by_id: dict[int, tuple[object, PodView | None]] = {}
        views: list[PodView | None] = []
        for pod in pods:
            entry = self._entry(target, pod, old)
            by_id[id(pod)] = entry
            views.append(entry[1])
        return _Views(pods, views, by_id)

    @staticmethod
    def _entry(
        target: ReplicaTarget,
        pod: Mapping[str, Any],
        old: Mapping[int, tuple[object, PodView | None]],
    ) -> tuple[object, PodView | None]:
        """The entry kept for ``pod``: the one kept for this very object, else it read."""
        entry = old.get(id(pod))
        if entry is not None and entry[0] is pod:
            return entry
        ours = controller_uid(pod, kind=KIND_INFERENCE_REPLICA) == target.uid
        return (pod, pod_view(pod, replica=target.name) if ours else None)

    def forget(self, uid: str) -> None:
        for key in [k for k in self._replicas if k[0] == uid]:
            self._held -= len(self._replicas.pop(key).by_id)


@dataclass(frozen=True, slots=True)
class _Views:
    """A replica's pods as the last pass was given them, each one's view (None: not the
    replica's) at its position, and the entries by the pod's id (each holding its pod)."""

    pods: tuple[Mapping[str, Any], ...]
    views: list[PodView | None]
    by_id: dict[int, tuple[object, PodView | None]]


POD_VIEWS: Final = PodViewCache()
"""The controller's cache of pod views (one controller per process)."""


def replica_target(
    irep: Mapping[str, Any],
    fleet: LifecycleConfig | None = None,
    revisions: tuple[RevisionView, ...] = (),
) -> ReplicaTarget:
    """The desired state of an InferenceReplica (a JSON object from the cache), over the
    fleet-wide ``lifecycle`` settings ``fleet`` (``None``: none configured) and the cached
    ControllerRevisions ``revisions`` (a name another object holds is a collision).

    Only metadata and spec are validated here: the status is read by
    :func:`~.status.observed_rows` (the rows, validated once per class and per version: a
    refused row is ``InstanceStatusDecodeFailed`` with reason ``row_shape``) and
    :func:`~.status.status_summary` (the rest), so rows are never validated twice and a bad
    row is never reported as an unreadable object.
    """
    try:
        model = InferenceReplica.model_validate({k: v for k, v in irep.items() if k != "status"})
    except ValidationError as err:
        raise InvalidReplica(str(err)) from err
    meta = model.metadata
    spec = model.spec
    name = meta.name or ""
    parent: ParentRef | None = None
    if spec.parent_ref is not None:
        owner = meta.controller_ref()
        uid = (
            owner.uid
            if owner is not None
            and owner.kind == KIND_INFERENCE_SERVICE
            and owner.name == spec.parent_ref.name
            else None
        )
        parent = ParentRef(spec.parent_ref.name, uid)
    isvc = parent.name if parent is not None else name
    runners = tuple(
        RunnerShape(
            name=runner.name,
            size=1 if runner.size is None else runner.size,
            template=runner.template,
        )
        for runner in spec.runners
    )
    # Upstream scopes revision names to the InferenceService (its uid, from the replica's
    # controller reference); a standalone replica is its own scope.
    owner_uid = meta.uid or ""  # the ControllerRevisions' owner: the InferenceReplica
    status = irep.get("status")
    stored_cc = status.get("collisionCount") if isinstance(status, Mapping) else None
    resolved = resolve_revision(
        isvc=isvc,
        component=spec.component,
        runners=runners,
        owner_uid=owner_uid,
        replica_uid=meta.uid or "",
        collision_count=stored_cc if isinstance(stored_cc, int) and stored_cc >= 0 else 0,
        existing=revisions,
    )
    lifecycle = spec.lifecycle
    min_ready = spec.min_ready_seconds
    if min_ready is None and lifecycle is not None:
        min_ready = lifecycle.min_ready_seconds
    return ReplicaTarget(
        namespace=meta.namespace or "",
        name=name,
        uid=meta.uid or "",
        generation=meta.generation or 0,
        isvc=isvc,
        component=spec.component,
        parent=parent,
        replicas=spec.replicas,
        runners=runners,
        update_revision=resolved.name,
        revision_payload=resolved.payload,
        hash_owner_uid=owner_uid,
        legacy_revision=resolved.legacy,
        collision_count=resolved.collision_count,
        paused=bool(spec.paused),
        deleting=meta.deletion_timestamp is not None,
        deleted_at=meta.deletion_timestamp,
        orphaning=meta.deletion_timestamp is not None
        and FINALIZER_ORPHAN in (meta.finalizers or ()),
        has_finalizer=FINALIZER in (meta.finalizers or ()),
        ready_policy=(lifecycle.ready_policy if lifecycle else None) or "AllPodReady",
        migration_mode=(lifecycle or Lifecycle()).effective_migration_mode,
        min_ready_seconds=min_ready or 0,
        update=update_policy(lifecycle, fleet),
        release_held=(meta.annotations or {}).get(ANNOTATION_RELEASE_HELD_REVISION),
        revision_history_limit=revision_history_limit(spec.revision_history_limit, fleet),
        fleet=fleet or LifecycleConfig(),
    )


def endpoint_readiness(slices: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """Pod uid -> whether the EndpointSlices list it as a ready endpoint (in any slice).

    ``conditions.ready`` absent counts as ready, as the EndpointSlice API tells consumers to
    read an unknown state; a terminating endpoint is never ready.
    """
    found: dict[str, bool] = {}
    for item in slices:
        for endpoint in item.get("endpoints") or ():
            ref = endpoint.get("targetRef") or {}
            uid = ref.get("uid")
            if not uid or ref.get("kind", "Pod") != "Pod":
                continue
            conditions = endpoint.get("conditions") or {}
            ready = (
                conditions.get("ready") is not False and conditions.get("terminating") is not True
            )
            found[uid] = found.get(uid, False) or ready
    return found


def observe(
    irep: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    fleet: LifecycleConfig | None = None,
    slices: Sequence[Mapping[str, Any]] = (),
    revisions: Iterable[Mapping[str, Any]] = (),
) -> tuple[ReplicaTarget, ObservedState]:
    """The planner's inputs for ``irep`` and the pods the cache holds for it, under the
    fleet-wide ``lifecycle`` settings ``fleet``; see :func:`observe_pods` for ``slices``.

    Raises :class:`InvalidReplica` or :class:`~.status.RowsUnreadable` when the object can't
    be planned for.
    """
    views = revision_views(revisions, uid=str((irep.get("metadata") or {}).get("uid") or ""))
    target = replica_target(irep, fleet, views)
    return target, observe_pods(target, irep, pods, slices, views)


def _grouped(
    views: Sequence[PodView],
    shown_by: tuple[LegacyTranslation, tuple[tuple[str, bool], ...]],
) -> tuple[dict[int, tuple[PodView, ...]], tuple[PodView, ...]]:
    """The pod views by Instance index (each Instance's by name) and the strays (no index),
    each as the legacy translation and the Services' endpoints (``shown_by``) show it."""
    translate, endpoints = shown_by
    ready = dict(endpoints)
    grouped: dict[int, list[PodView]] = defaultdict(list)
    strays: list[PodView] = []
    for read in views:
        view = _shown(read, translate, ready)
        if view.index < 0:
            strays.append(view)
        else:
            grouped[view.index].append(view)
    by_instance = {
        index: tuple(v) if len(v) == 1 else tuple(sorted(v, key=lambda p: p.name))
        for index, v in grouped.items()
    }
    return by_instance, tuple(strays)


def _shown(view: PodView, translate: LegacyTranslation, ready: Mapping[str, bool]) -> PodView:
    """``view`` as the legacy translation and the Services' endpoints show it."""
    view = translate.pod(view)
    if view.uid in ready:
        view = dataclasses.replace(view, endpoint_ready=ready[view.uid])
    return view


def _grouped_patched(
    old: tuple[tuple[PodView, ...]],
    grouped: tuple[dict[int, tuple[PodView, ...]], tuple[PodView, ...]],
    new: tuple[tuple[PodView, ...]],
    changed: list[int],
    shown_by: tuple[LegacyTranslation, tuple[tuple[str, bool], ...]],
) -> tuple[dict[int, tuple[PodView, ...]], tuple[PodView, ...]] | None:
    """:func:`_grouped` of ``new`` from ``grouped``, that of ``old``, which differs from it
    at ``changed`` only: where each changed view is a new version of the pod before it (its
    Instance and name), the view takes its place in its Instance's pods (sorted by name, and
    the only one of its name there, so its place is the same); None otherwise."""
    [before], [after] = old, new
    by_instance, strays = grouped
    translate, endpoints = shown_by
    out: dict[int, tuple[PodView, ...]] | None = None
    ready = dict(endpoints)
    for pos in changed:
        was, now = before[pos], after[pos]
        if was.index < 0 or now.index != was.index or now.name != was.name:
            return None
        group = (by_instance if out is None else out)[was.index]
        at = [k for k, view in enumerate(group) if view.name == was.name]
        if len(at) != 1:
            return None
        if out is None:
            out = dict(by_instance)
        [k] = at
        out[was.index] = (*group[:k], _shown(now, translate, ready), *group[k + 1 :])
    return (by_instance if out is None else out), strays


def _translated(
    rows: Sequence[InstanceStatus], given: tuple[tuple[int, ...], LegacyTranslation]
) -> Mapping[int, InstanceStatus]:
    """``rows`` under their ``indexes`` as ``translate`` reads them (``given``)."""
    indexes, translate = given
    return translate.rows(dict(zip(indexes, rows, strict=True)))


def _translated_patched(
    old: tuple[tuple[InstanceStatus, ...]],
    translated: Mapping[int, InstanceStatus],
    new: tuple[tuple[InstanceStatus, ...]],
    changed: list[int],
    given: tuple[tuple[int, ...], LegacyTranslation],
) -> Mapping[int, InstanceStatus]:
    """:func:`_translated` of ``new`` from ``translated``, that of ``old``, which differs
    from it at ``changed`` only (the indexes the same): the changed rows translated anew."""
    [rows] = new
    indexes, translate = given
    out = dict(translated)
    for pos in changed:
        index = indexes[pos]
        out[index] = translate.rows({index: rows[pos]})[index]
    return out


_GROUPED: Final = SameMemo(_grouped, patch=_grouped_patched)
"""The grouped views of the very same pod views (a pass whose pods didn't change), or
patched from them where a few pods have new versions."""
_TRANSLATED: Final = SameMemo(_translated, patch=_translated_patched)
"""The translated rows of the very same rows, or patched from them where a few changed."""


def observe_pods(
    target: ReplicaTarget,
    irep: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]] = (),
    revisions: tuple[RevisionView, ...] = (),
) -> ObservedState:
    """What the caches show of ``target``: its pods, previous rows and status summary.

    ``pods`` may hold other objects' pods (an index lookup by owner uid); only the ones
    this InferenceReplica controls are kept. ``slices`` are the EndpointSlices of the
    component's traffic Service (:func:`~.names.traffic_service`); none means it has none,
    and the pods' own conditions alone judge routing. Raises
    :class:`~.status.RowsUnreadable` when the rows can't be read.
    """
    endpoints = endpoint_readiness(slices)
    translate = legacy_translation(target)
    by_instance, strays = _GROUPED.get(
        target.uid,
        (POD_VIEWS.views(target, pods),),
        ((translate, tuple(endpoints.items())),),
    )
    status = irep.get("status")
    rows = observed_rows(irep)
    if translate.legacy is not None:  # a new model per row it names: the same ones again
        rows = _TRANSLATED.get(target.uid, (tuple(rows.values()),), ((tuple(rows), translate),))
    return ObservedState(
        pods=by_instance,
        rows=rows,
        status=translate.status(status_summary(status)),
        stray_pods=strays,
        service_routes=bool(slices),
        revisions=revisions,
    )
