"""PodGroups: gang scheduling of multi-pod Instances (scheduler-plugins' ``scheduling.x-k8s.io``).

Why: a leader and its workers are useless apart, so a gang-aware scheduler must see the whole
Instance as one unit before it binds any of its pods. scheduler-plugins' coscheduling reads a
PodGroup named by the pods' ``scheduling.x-k8s.io/pod-group`` label; a pod that names a
PodGroup the scheduler doesn't know yet is scheduled on its own, which defeats the gang. So
the PodGroup comes first, and the pods only once the cache shows it.

The rules, decided here (pure) and written by the shell:

* used only when the PodGroup CRD was present when the manager started (``enabled``); without
  it an InferenceReplica with multi-pod Instances shows condition GangSchedulingUnavailable
  (reason PodGroupCRDNotInstalled) and its pods are created as they would be otherwise;
* each multi-pod Instance that has pods or an operation (wanted, or an Update's surge) has one
  PodGroup ``<isvc>-<component>-<index>``, owned by the InferenceReplica (controller
  reference), labelled ``ome.io/inferenceservice``, ``component``, ``ome.io/managed-by:
  OMENative`` and ``ome.io/instance-index``; ``spec.minMember`` is the Instance's pod count
  and ``spec.scheduleTimeoutSeconds`` is instanceReadyTimeout clamped to
  ``gangScheduleTimeout`` (:func:`schedule_timeout`);
* an Instance's missing pods are created only in a pass whose cache shows its PodGroup, ours
  and not terminating; the pass that creates the PodGroup holds them back (the PodGroup's
  watch event brings the next pass). While the PodGroup is terminating the operation waits
  with token PodGroupTerminating; while another object's PodGroup holds the name, they wait
  with a Warning event;
* a PodGroup whose labels, minMember or scheduleTimeoutSeconds differ from these is patched
  (the resourceVersion it was read at is the patch's precondition);
* a PodGroup the gang scheduler ruled Failed (``status.phase``; final for the object) is
  deleted, with a Warning PodGroupReset, unless its Instance is being deleted or one of its
  pods has failed (a rebuilt group around a failed member would get the same verdict); the
  next pass makes it again;
* a PodGroup of ours whose Instance no longer needs one and has no pod left (scaled down, torn
  down, or the component is single-pod now) is deleted, by uid, within the pass's scale-down
  budget: each costs 1, as an Instance whose pods are gone and whose cleanup still runs does,
  both in the footprint a percentage resolves against and in the budget, which they share
  with the Delete batch this pass starts (whose pods are spent first); the first one always
  goes, so a pass never wedges; the rest wait for later passes. The finalizer stays until none
  is left;
* events, one of each per pass at most: MaybeNoGangScheduler when this pass creates PodGroups
  while the pods' schedulerName (the leader's, else the workers') is unset or
  ``default-scheduler``; GangSplitRisk when this pass starts a gang (creates its PodGroup, or
  without the CRD its pods) whose worker pods have no required podAffinity.

Invariant: no pod of a multi-pod Instance is created, while PodGroups are enabled, in a pass
whose cache doesn't show its PodGroup as ours and live; paused, nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from omed.api.constants import (
    KIND_INFERENCE_REPLICA,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
    LABEL_MANAGED_BY,
    MANAGED_BY_OME_NATIVE,
    POD_GROUP_API_GROUP,
)
from omed.api.events import WARNING
from omed.controllers.inferencereplica.core import names, operations
from omed.controllers.inferencereplica.core.actions import RETRY_SOON, RecordEvent, ScaleDownWave
from omed.controllers.inferencereplica.core.batching import budget_of, delete_cost
from omed.controllers.inferencereplica.core.model import ReplicaTarget
from omed.controllers.inferencereplica.core.podgroupactions import (
    CreatePodGroup,
    DeletePodGroup,
    GangState,
    PodGroupView,
    PodGroupWrite,
    UpdatePodGroup,
)
from omed.controllers.inferencereplica.core.podtemplate import (
    instance_subdomain,
    owner_reference,
    revision_spec,
)
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork
from omed.controllers.owners import controller_uid

POD_GROUP_SELECTOR: Final = f"{LABEL_MANAGED_BY}={MANAGED_BY_OME_NATIVE},{LABEL_COMPONENT}"
"""The label selector of the PodGroup cache: the PodGroups OMENative writes."""
PHASE_FAILED: Final = "Failed"
DEFAULT_SCHEDULER: Final = "default-scheduler"

__all__ = [
    "POD_GROUP_SELECTOR",
    "admits",
    "finish",
    "group_name",
    "is_gang",
    "pod_group_body",
    "remaining",
    "reset",
    "schedule_timeout",
    "start",
    "views",
]


# -- reading the cache ------------------------------------------------------------------------


def views(objs: Iterable[Mapping[str, Any]], *, uid: str) -> tuple[PodGroupView, ...]:
    """The cached PodGroups, as the core compares them (``uid``: the replica's)."""
    found = []
    for obj in objs:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        minimum = spec.get("minMember")
        timeout = spec.get("scheduleTimeoutSeconds")
        found.append(
            PodGroupView(
                name=str(meta.get("name") or ""),
                uid=str(meta.get("uid") or ""),
                resource_version=str(meta.get("resourceVersion") or ""),
                ours=bool(uid) and controller_uid(obj, kind=KIND_INFERENCE_REPLICA) == uid,
                terminating=bool(meta.get("deletionTimestamp")),
                min_member=minimum if isinstance(minimum, int) else None,
                schedule_timeout=timeout if isinstance(timeout, int) else None,
                labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
                phase=str(status["phase"]) if status.get("phase") else None,
            )
        )
    return tuple(sorted(found, key=lambda view: view.name))


def start(*, enabled: bool, groups: Iterable[PodGroupView]) -> GangState:
    """The pass's PodGroup state, before anything is decided."""
    return GangState(enabled=enabled, groups={group.name: group for group in groups})


# -- what a PodGroup should be ----------------------------------------------------------------


def is_gang(target: ReplicaTarget) -> bool:
    """Whether the component's Instances have more than one pod (a gang)."""
    return target.pods_per_instance > 1


def group_name(target: ReplicaTarget, index: int) -> str:
    """``<isvc>-<component>-<index>``: the PodGroup the Instance's pods name in their label."""
    return instance_subdomain(target.isvc, target.component, index)


def schedule_timeout(target: ReplicaTarget) -> int | None:
    """instanceReadyTimeout (the component's, else the ConfigMap's) in whole seconds, raised to
    ``gangScheduleTimeout.min`` and lowered to ``.max`` where those are set; an unset (or zero)
    instanceReadyTimeout takes the min. None (the field left out: the scheduler's own default)
    when nothing gives a positive number."""
    clamp = target.fleet.gang_schedule_timeout
    seconds = int(target.update.ready_timeout or 0)
    if clamp.min is not None and seconds < clamp.min:
        seconds = int(clamp.min)
    if clamp.max is not None and seconds > clamp.max:
        seconds = int(clamp.max)
    return seconds if seconds > 0 else None


def _labels(target: ReplicaTarget, index: int) -> dict[str, str]:
    return {
        LABEL_INFERENCE_SERVICE: target.isvc,
        LABEL_COMPONENT: target.component,
        LABEL_MANAGED_BY: MANAGED_BY_OME_NATIVE,
        LABEL_INSTANCE_INDEX: str(index),
    }


def pod_group_body(target: ReplicaTarget, index: int) -> dict[str, Any]:
    """The PodGroup to create for Instance ``index``."""
    spec: dict[str, Any] = {"minMember": target.pods_per_instance}
    timeout = schedule_timeout(target)
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {
        "apiVersion": f"{POD_GROUP_API_GROUP}/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": group_name(target, index),
            "namespace": target.namespace,
            "labels": _labels(target, index),
            "ownerReferences": [owner_reference(target)],
        },
        "spec": spec,
    }


def _drift(target: ReplicaTarget, index: int, group: PodGroupView) -> dict[str, Any] | None:
    """The merge patch that brings ``group`` to what it should be; None when it is."""
    labels = {k: v for k, v in _labels(target, index).items() if group.labels.get(k) != v}
    spec: dict[str, Any] = {}
    if group.min_member != target.pods_per_instance:
        spec["minMember"] = target.pods_per_instance
    timeout = schedule_timeout(target)
    if group.schedule_timeout != timeout:
        spec["scheduleTimeoutSeconds"] = timeout  # None removes it
    if not labels and not spec:
        return None
    patch: dict[str, Any] = {"metadata": {"resourceVersion": group.resource_version}}
    if labels:
        patch["metadata"]["labels"] = labels
    if spec:
        patch["spec"] = spec
    return patch


# -- the pass ---------------------------------------------------------------------------------


def _state(work: PassWork) -> GangState:
    return work.gangs


def _decide(state: GangState, name: str, write: PodGroupWrite) -> None:
    state.decided.add(name)
    state.writes.append(write)


def _create(state: GangState, target: ReplicaTarget, index: int) -> None:
    name = group_name(target, index)
    _decide(state, name, CreatePodGroup(name, index, pod_group_body(target, index)))
    state.created_for.append(index)


def reset(work: PassWork, instances: list[InstanceWork]) -> None:
    """Before the operations move: delete the Failed PodGroups of Instances that may be
    rebuilt (PodGroupReset), so that no pod of theirs is created against them."""
    state = _state(work)
    if not state.enabled or not work.act or not is_gang(work.target):
        return
    for inst in instances:
        name = group_name(work.target, inst.index)
        group = state.groups.get(name)
        if group is None or not group.ours or group.terminating or group.phase != PHASE_FAILED:
            continue
        if work.target.deleting or operations.is_delete(inst.op):
            continue  # a teardown deletes it once the pods are gone
        if any(pod.phase == PHASE_FAILED and not pod.terminating for pod in inst.facts.pods):
            continue  # the failed member goes first, or the new group gets the same verdict
        _decide(state, name, DeletePodGroup(name=name, uid=group.uid))
        state.held[inst.index] = None
        _warn(
            work,
            names.POD_GROUP_RESET,
            component=work.target.component,
            name=name,
            reason="its phase is Failed",
        )


def admits(work: PassWork, inst: InstanceWork) -> bool:
    """Whether ``inst``'s missing pods may be created in this pass (steps.create asks).

    Not while PodGroups are enabled and the cache doesn't show the Instance's PodGroup as ours
    and live: the PodGroup is created in this pass (when missing), and the pods wait."""
    state = _state(work)
    target = work.target
    if not state.enabled or not is_gang(target):
        return True
    name = group_name(target, inst.index)
    if inst.index in state.held:
        return False
    group = state.groups.get(name)
    if group is None:
        if name not in state.decided:
            _create(state, target, inst.index)
        state.held[inst.index] = None
        work.requeue.append(RETRY_SOON)  # a backstop: the PodGroup's add event comes first
        return False
    if not group.ours:
        state.held[inst.index] = None
        _warn(
            work,
            names.POD_GROUP_NAME_TAKEN,
            component=target.component,
            name=name,
            index=inst.index,
        )
        return False
    if group.terminating:
        state.held[inst.index] = names.WAITING_POD_GROUP_TERMINATING
        return False
    return True


def _needs_group(work: PassWork, inst: InstanceWork) -> bool:
    return (
        inst.keep
        and not work.target.deleting
        and not operations.is_delete(inst.op)
        and (inst.wanted or inst.surge_of is not None)
        and (bool(inst.facts.pods) or inst.op is not None)
    )


def finish(work: PassWork, instances: list[InstanceWork], wave: ScaleDownWave | None) -> None:
    """After the operations moved: the GangSchedulingUnavailable condition, the PodGroups of
    the Instances that need one (created or patched), the leftovers' deletes, the events."""
    state = _state(work)
    target = work.target
    gang = is_gang(target)
    if not state.enabled:
        if gang and not target.deleting:
            work.flag(
                names.CONDITION_GANG_UNAVAILABLE,
                reason=names.REASON_POD_GROUP_CRD_NOT_INSTALLED,
                message=names.MESSAGE_POD_GROUP_CRD_NOT_INSTALLED,
            )
            if work.creates:
                _split_risk(work)
        return
    if not work.act:
        return
    needed: set[str] = set()
    if gang:
        for inst in instances:
            if not _needs_group(work, inst):
                continue
            name = group_name(target, inst.index)
            needed.add(name)
            if name in state.decided:
                continue
            group = state.groups.get(name)
            if group is None:
                _create(state, target, inst.index)
            elif group.ours and not group.terminating:
                patch = _drift(target, inst.index, group)
                if patch is not None:
                    _decide(state, name, UpdatePodGroup(name=name, patch=patch))
    occupied = {
        group_name(target, inst.index)
        for inst in instances
        if inst.facts.pods and (gang or len(inst.facts.pods) > 1)
    }
    _delete_leftovers(work, instances, wave, keep=needed | occupied)
    if state.created_for:
        _no_gang_scheduler(work)
        if gang:
            _split_risk(work)


def _delete_leftovers(
    work: PassWork, instances: list[InstanceWork], wave: ScaleDownWave | None, *, keep: set[str]
) -> None:
    state = _state(work)
    leftovers = [
        group
        for name, group in sorted(state.groups.items())
        if group.ours and not group.terminating and name not in keep and name not in state.decided
    ]
    if not leftovers:
        return
    budget = budget_of(
        work.settings.scale_down_pod_batch_size,
        (
            wave.pod_footprint
            if wave is not None
            else sum(
                delete_cost(len(i.facts.pods), cleanup_running=operations.is_delete(i.op))
                for i in instances
            )
        )
        + len(leftovers),
    )
    started = set(wave.started_instances) if wave is not None else set()
    spent = sum(len(inst.facts.pods) for inst in instances if inst.index in started)
    if budget is None:
        taken = leftovers
    else:
        room = budget - spent
        taken = leftovers[: max(room, 0 if spent else 1)]
    for group in taken:
        _decide(state, group.name, DeletePodGroup(name=group.name, uid=group.uid))
    if len(taken) < len(leftovers):
        work.requeue.append(work.settings.scale_down_requeue_interval or RETRY_SOON)


def remaining(work: PassWork) -> bool:
    """Whether a PodGroup of ours is still in the cache (the finalizer waits for none)."""
    return any(group.ours for group in _state(work).groups.values())


# -- events -----------------------------------------------------------------------------------


def _warn(work: PassWork, warning: names.WarningEvent, **fields: object) -> None:
    _state(work).warnings.append((warning.reason, warning.message(**fields)))


def events(work: PassWork) -> list[RecordEvent]:
    """The pass's PodGroup Warning events (once each per pass)."""
    seen: list[tuple[str, str]] = []
    for warning in _state(work).warnings:
        if warning not in seen:
            seen.append(warning)
    return [RecordEvent(type=WARNING, reason=reason, message=message) for reason, message in seen]


def _scheduler_name(target: ReplicaTarget) -> str:
    """The pods' schedulerName: the leader's (or the single pod's), else the workers'."""
    for runner in ("leader", "default", "worker"):
        if target.runner(runner) is None:
            continue
        spec, _ = revision_spec(target, runner)
        name = spec.get("schedulerName")
        if isinstance(name, str) and name:
            return name
    return ""


def _no_gang_scheduler(work: PassWork) -> None:
    scheduler = _scheduler_name(work.target)
    if scheduler in ("", DEFAULT_SCHEDULER):
        _warn(
            work,
            names.MAYBE_NO_GANG_SCHEDULER,
            component=work.target.component,
            scheduler=scheduler,
        )


def _split_risk(work: PassWork) -> None:
    worker = work.target.runner("worker")
    if worker is None or worker.size < 1 or work.target.runner("leader") is None:
        return
    spec, _ = revision_spec(work.target, "worker")
    affinity = spec.get("affinity") or {}
    pod_affinity = affinity.get("podAffinity") if isinstance(affinity, Mapping) else None
    required = (
        pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(pod_affinity, Mapping)
        else None
    )
    if not required:
        _warn(work, names.GANG_SPLIT_RISK, component=work.target.component)
