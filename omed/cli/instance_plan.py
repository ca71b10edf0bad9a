"""``kubectl ome instance plan``: what the controller's next pass over a component would do.

Why: when an InferenceReplica doesn't move, the question is what OME is about to do and what
each Instance waits for. The answer is not guessed here: the command reads the objects the
controller's pass reads (the InferenceReplica, its pods, ControllerRevisions and PodGroups,
the EndpointSlices of its traffic Service, the pods' nodes, the ``inferenceservice-config``
ConfigMap's settings), assembles them with the controller's own function
(:func:`omed.controllers.inferencereplica.core.assemble.observe_replica`) and runs the
controller's pure planner (:func:`~omed.controllers.inferencereplica.core.decide.decide`) on
them, with the current time. This module turns the :class:`Decision` into lines; it writes
nothing to the cluster, ever.

What can differ from the controller's real next pass, and why: the controller keeps a
per-InferenceReplica memory between passes (refused creates, the status write's pace) that
lives only in the manager, so the plan starts from an empty one; a pass waits while the
controller's own writes aren't in its caches yet; and the objects may change between this
read and the pass. The plan says what one pass does from what the API server shows now.

Batch numbers count from now: ``batch 1 of 3`` is the batch this pass starts, out of the
batches the Instances still to create (or to delete) need at the configured batch size.

Invariant: the functions here are pure; :func:`read_inputs` only reads (get and list).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from omed.api.constants import ANNOTATION_RELEASE_HELD_REVISION, LABEL_INFERENCE_SERVICE
from omed.cli.indexranges import index_ranges
from omed.config import StartupConfigError, lifecycle_entry, load_startup_config
from omed.controllers.inferencereplica.core import actions, names, orphans
from omed.controllers.inferencereplica.core.assemble import (
    labelled,
    node_names,
    observe_replica,
    with_migrations,
    with_nodes,
)
from omed.controllers.inferencereplica.core.batching import Candidate, budget_of, take_batch
from omed.controllers.inferencereplica.core.conversion import StoredForm
from omed.controllers.inferencereplica.core.decide import Decision, PassInput, decide
from omed.controllers.inferencereplica.core.encoding import StatusEncodingSettings
from omed.controllers.inferencereplica.core.memory import EMPTY
from omed.controllers.inferencereplica.core.model import ObservedState, PlanSettings, ReplicaTarget
from omed.controllers.inferencereplica.core.observe import InvalidReplica
from omed.controllers.inferencereplica.core.podgroups import POD_GROUP_SELECTOR
from omed.controllers.inferencereplica.core.revisions import REVISION_SELECTOR
from omed.controllers.inferencereplica.core.status import RowsUnreadable
from omed.informers.endpoints import LABEL_SERVICE_NAME, transform_endpoint_slice
from omed.informers.indexers import owner_uid_index
from omed.informers.nodes import transform_node
from omed.informers.transform import transform_pod
from omed.kube.client import KubeClient
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import (
    CONFIGMAPS,
    CONTROLLER_REVISIONS,
    ENDPOINT_SLICES,
    NODES,
    POD_GROUPS,
    PODS,
)
from omed.manager.startup import detect_pod_group_crd

REPORT_API_VERSION: Final = "cli.ome.io/v1alpha1"
REPORT_KIND: Final = "InstancePlanReport"
CONFIG_NAME: Final = "inferenceservice-config"


class PlanError(Exception):
    """A read the plan can't do without: ``error: <message>`` and exit 1."""


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """Everything one pass decides from, as read from the API server."""

    irep: Mapping[str, Any]
    pods: list[dict[str, Any]]
    """The namespace's pods labelled ``ome.io/inferenceservice``, as the pod cache keeps them."""
    revisions: list[Mapping[str, Any]]
    slices: list[dict[str, Any]]
    pod_groups: list[Mapping[str, Any]] | None
    nodes: dict[str, dict[str, Any]] | None
    """The pods' nodes by name; None when they couldn't be read (nothing judged from nodes)."""
    config: Mapping[str, str]
    pod_groups_crd: bool
    parent: Mapping[str, Any] | None = None
    """The InferenceService the replica belongs to: its migration mailbox."""
    notes: list[str] = field(default_factory=list)
    """What couldn't be read and was left out, for the report."""


def settings_of(
    config: Mapping[str, str], *, pod_groups: bool
) -> tuple[PlanSettings, StatusEncodingSettings, Any]:
    """The settings the manager reads from ``config`` (its ConfigMap's data): the startup
    ``lifecycle`` batching and ``omenativeStatus`` entries, and the per-pass ``lifecycle``
    settings. Raises :class:`PlanError` for an entry that would stop the manager."""
    try:
        startup = load_startup_config(config)
    except StartupConfigError as exc:
        raise PlanError(f"{CONFIG_NAME}: {exc}") from None
    return (
        PlanSettings.from_config(startup.lifecycle_scale, pod_groups=pod_groups),
        StatusEncodingSettings.from_config(startup.omenative_status),
        lifecycle_entry(config),
    )


@dataclass(frozen=True, kw_only=True)
class Planned:
    """One pass decided: what it decided from, and the decision."""

    target: ReplicaTarget
    observed: ObservedState
    decision: Decision
    settings: PlanSettings
    adoptable: bool
    """Pods no controller owns wait to be adopted (the pass adopts them before planning)."""


def plan_pass(inputs: Inputs, *, now: dt.datetime) -> Planned:
    """The controller's next pass over ``inputs``. Raises :class:`PlanError` for a replica
    the controller can't read either."""
    settings, encoding, fleet = settings_of(inputs.config, pod_groups=inputs.pod_groups_crd)
    irep = inputs.irep
    meta = irep.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    try:
        target, observed = observe_replica(
            irep,
            fleet,
            max_rows=encoding.bound,
            pods=[p for p in inputs.pods if uid in owner_uid_index(p)],
            revisions=labelled(inputs.revisions, irep),
            slices=lambda _ns, service: [
                s
                for s in inputs.slices
                if ((s.get("metadata") or {}).get("labels") or {}).get(LABEL_SERVICE_NAME)
                == service
            ],
            pod_groups=(
                labelled(inputs.pod_groups, irep) if inputs.pod_groups is not None else None
            ),
        )
    except (InvalidReplica, RowsUnreadable) as exc:  # the controller leaves it alone too
        raise PlanError(
            f"the controller can't read InferenceReplica {meta.get('namespace')}/"
            f"{meta.get('name')} and leaves it alone until it changes: {exc}"
        ) from None
    if inputs.nodes is not None:
        observed = with_nodes(observed, inputs.nodes)
    observed = with_migrations(
        observed,
        revisions=labelled(inputs.revisions, irep),
        parent=inputs.parent if target.parent is not None else None,
    )
    adoptable: list[Mapping[str, Any]] = []
    if not (target.deleting or target.paused):
        mine = [
            p
            for p in inputs.pods
            if ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_INFERENCE_SERVICE)
            == target.isvc
        ]
        adoptable = orphans.adoptable(target, mine)
    decision = decide(
        PassInput(
            target=target,
            observed=observed,
            settings=settings,
            now=now,
            monotonic=0.0,
            memory=EMPTY,
            stored=StoredForm(
                version=str(meta.get("resourceVersion") or ""),
                status=irep.get("status"),
                settings=encoding,
            ),
            adoptable=bool(adoptable),
        )
    )
    return Planned(
        target=target,
        observed=observed,
        decision=decision,
        settings=settings,
        adoptable=bool(adoptable),
    )


# --- what the decision says, as lines ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One line of the plan: ``do`` (an action of this pass) or ``waiting``."""

    kind: str
    """``do`` or ``waiting``."""
    text: str
    action: str | None = None
    """The action's kind (CreatePod, DeletePod, SetServingGate...), for -o json."""
    instance: int | None = None
    pod: str | None = None


def _batches(costs: Sequence[int], budget: int | None) -> int:
    """How many batches ``costs`` (Instances in order) need under ``budget``."""
    queue = [Candidate(i, c) for i, c in enumerate(costs)]
    count = 0
    while queue:
        batch, queue_rest = take_batch(queue, budget)
        count += 1
        queue = list(queue_rest)
        if not batch:  # never: the first candidate always goes
            break
    return count


def _why(row: Any) -> str:
    """Why an Instance's operation runs, in words: scale-up, scale-down, update..."""
    op = row.operation if row is not None else None
    if op is None:
        return "no operation"
    reason = str(op.reason or "")
    words: dict[str, str] = {
        names.OperationReason.SCALE_UP: "scale-up",
        names.OperationReason.PODS_MISSING: "pods missing",
        names.OperationReason.SCALE_DOWN: "scale-down",
        names.OperationReason.TEARDOWN: "InferenceReplica deleted",
        names.OperationReason.REVISION_CHANGED: f"update to {op.target_revision or '-'}",
        names.OperationReason.RETRY: f"retry of {op.target_revision or '-'}",
    }
    return words.get(reason, f"{op.type or 'operation'} {reason or '-'}")


def steps_of(planned: Planned) -> list[Step]:
    """The plan's lines: each action of the pass, then what each Instance waits for."""
    target, observed, settings = planned.target, planned.observed, planned.settings
    decided, adoptable = planned.decision.plan, planned.adoptable
    rows = {row.index: row for row in decided.rows}
    out: list[Step] = []
    if adoptable and target.has_finalizer:
        out.append(
            Step(
                "do",
                "adopt the pods no controller owns that are named and labelled as this "
                "InferenceReplica's, then plan again",
                action="AdoptPods",
            )
        )
    # Scale-up batches: this pass's batch is the first of those still to go.
    wanted = 0 if target.deleting else target.replicas
    per = target.pods_per_instance
    created = {c.index for c in decided.of_type(actions.CreatePods)}
    pending_up = [
        i
        for i in range(wanted)
        if i not in created
        and (rows.get(i) is None or rows[i].operation is None)
        and len(observed.pods.get(i, ())) < per
    ]
    footprint = max(sum(len(p) for p in observed.pods.values()), wanted * per)
    up_budget = budget_of(settings.scale_up_pod_batch_size, footprint)
    up_total = 1 + _batches([per - len(observed.pods.get(i, ())) for i in pending_up], up_budget)
    wave = decided.wave_log
    down_total = 1
    if wave is not None:
        costs = [max(len(observed.pods.get(i, ())), 1) for i in wave.deferred_instances]
        down_total = 1 + _batches(costs, wave.pod_budget)

    def context(index: int) -> str:
        why = _why(rows.get(index))
        if why == "scale-up":
            return f"scale-up, batch 1 of {up_total}"
        if why == "scale-down" and wave is not None and index in wave.started_instances:
            return f"scale-down, batch 1 of {down_total}"
        return why

    def owner(index: int) -> tuple[str, str]:
        """`` of Instance N`` and why the pass acts on it; a pod of no Instance (index -1)
        names none and is left over."""
        if index < 0:
            return "", "left over"
        return f" of Instance {index}", context(index)

    for action in decided.actions:
        if isinstance(action, actions.AddFinalizer):
            out.append(Step("do", f"add finalizer {names.FINALIZER}", action="AddFinalizer"))
        elif isinstance(action, actions.WriteStatus):
            progress = _progress(action)
            text = f"write status ({len(action.rows)} rows" + (
                f", progress {progress})" if progress else ")"
            )
            out.append(Step("do", text, action="WriteStatus"))
        elif isinstance(action, actions.RecordEvent):
            out.append(
                Step("do", f"event {action.type} {action.reason}: {action.message}", "RecordEvent")
            )
        elif isinstance(action, actions.CreatePods):
            for pod in action.pods:
                text = (
                    f"create pod {pod.name} for Instance {action.index} ({context(action.index)})"
                )
                out.append(_pod_step("CreatePod", action.index, pod.name, text))
        elif isinstance(action, actions.DeletePods):
            of, why = owner(action.index)
            for ref in action.pods:
                text = f"delete pod {ref.name}{of} ({why})"
                out.append(_pod_step("DeletePod", action.index, ref.name, text))
        elif isinstance(action, actions.SetServingGate):
            of, why = owner(action.index)
            state = "True" if action.serving else "False"
            text = (
                f"set serving gate of pod {action.pod.name}{of} to {state} ({action.reason}; {why})"
            )
            out.append(_pod_step("SetServingGate", action.index, action.pod.name, text))
        elif isinstance(action, actions.PatchPodImages):
            text = (
                f"patch images of pod {action.pod.name} of Instance {action.index} to "
                f"revision {action.revision} (in place; {context(action.index)})"
            )
            out.append(_pod_step("PatchPodImages", action.index, action.pod.name, text))
        elif isinstance(action, actions.ForceDeletePod):
            text = (
                f"force-delete pod {action.pod.name} of Instance {action.index} "
                f"({action.cause} {action.node or '-'})"
            )
            out.append(_pod_step("ForceDeletePod", action.index, action.pod.name, text))
        elif isinstance(action, actions.RemoveReleaseAnnotation):
            out.append(
                Step(
                    "do",
                    f"remove annotation {ANNOTATION_RELEASE_HELD_REVISION}={action.value}",
                    action="RemoveReleaseAnnotation",
                )
            )
        elif isinstance(action, actions.RemoveFinalizer):
            lifted = " (teardown deadline passed)" if action.lifted else ""
            out.append(
                Step("do", f"remove finalizer {names.FINALIZER}{lifted}", action="RemoveFinalizer")
            )
        else:  # ControllerRevision and PodGroup writes
            kind = type(action).__name__
            name = getattr(action, "name", "")
            out.append(Step("do", f"{_words(kind)} {name}".strip(), action=kind))
    out.extend(
        _waiting(
            target=target, decided=decided, rows=rows, pending_up=pending_up, up_budget=up_budget
        )
    )
    if decided.requeue_after is not None:
        out.append(Step("do", f"look again in {decided.requeue_after:g}s", action="Requeue"))
    return out


def _pod_step(kind: str, index: int, pod: str, text: str) -> Step:
    """One pod action's line, with the action's kind, its Instance and its pod for ``-o json``."""
    return Step("do", text, action=kind, instance=index, pod=pod)


_OBJECT_KINDS: Final = ("ControllerRevision", "PodGroup")


def _words(kind: str) -> str:
    """``CreateControllerRevision`` -> ``create ControllerRevision``."""
    for name in _OBJECT_KINDS:
        if kind.endswith(name):
            return f"{kind.removesuffix(name).lower()} {name}"
    return kind


def _progress(action: actions.WriteStatus) -> str | None:
    for cond in action.status.conditions or ():
        if cond.type == names.CONDITION_PROGRESSING:
            return str(cond.reason or "") or None
    return None


def _waiting(
    *,
    target: ReplicaTarget,
    decided: actions.Plan,
    rows: Mapping[int, Any],
    pending_up: list[int],
    up_budget: int | None,
) -> list[Step]:
    out: list[Step] = []
    if target.paused and not target.deleting:
        out.append(Step("waiting", "waiting: the InferenceReplica is paused: no pod is written"))
    for index in sorted(rows):
        row = rows[index]
        op = row.operation
        if op is None:
            continue
        what = f"Instance {index} ({op.type}, {_why(row)}, step {op.step or '-'})"
        if op.waiting:
            pod = f" (pod {p})" if (p := _waiting_pod(row)) else ""
            out.append(Step("waiting", f"waiting: {what}: {op.waiting}{pod}", instance=index))
        elif op.step in (names.STEP_WAIT_READY, names.STEP_SURGE_WAIT_READY):
            out.append(Step("waiting", f"waiting: {what}: its pods to get Ready", instance=index))
        elif op.step in (names.STEP_DRAIN, names.STEP_SURGE_DRAIN):
            out.append(
                Step(
                    "waiting",
                    f"waiting: {what}: its pods to leave the Service's endpoints before they "
                    "are deleted",
                    instance=index,
                )
            )
        elif op.step == names.STEP_WAIT_PODS_GONE:
            out.append(Step("waiting", f"waiting: {what}: its pods to go", instance=index))
        elif op.step in names.PARKED_STEPS:
            out.append(Step("waiting", f"waiting: {what}: parked", instance=index))
    if pending_up and not (target.paused or target.deleting):
        size = "unbounded" if up_budget is None else f"{up_budget} pods a batch"
        out.append(
            Step(
                "waiting",
                f"waiting: Instance(s) {index_ranges(pending_up)} for a later scale-up "
                f"batch ({size})",
            )
        )
    wave = decided.wave_log
    if wave is not None and wave.deferred_instances:
        size = "unbounded" if wave.pod_budget is None else f"{wave.pod_budget} pods a batch"
        out.append(
            Step(
                "waiting",
                f"waiting: Instance(s) {index_ranges(wave.deferred_instances)} for a later "
                f"scale-down batch ({size})",
            )
        )
    return out


def _waiting_pod(row: Any) -> str | None:
    failure = row.last_failure
    return getattr(failure, "pod", None) if failure is not None else None


def report(
    *,
    isvc: str,
    component: str,
    target: ReplicaTarget,
    steps: Sequence[Step],
    now: dt.datetime,
    notes: Sequence[str],
) -> dict[str, Any]:
    """The ``-o json`` / ``-o yaml`` form."""
    return {
        "apiVersion": REPORT_API_VERSION,
        "kind": REPORT_KIND,
        "inferenceService": {"namespace": target.namespace, "name": isvc},
        "component": component,
        "inferenceReplica": {
            "name": target.name,
            "uid": target.uid,
            "generation": target.generation,
            "replicas": target.replicas,
            "updateRevision": target.update_revision,
            "paused": target.paused,
            "deleting": target.deleting,
        },
        "now": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "actions": [
            {k: v for k, v in dataclasses.asdict(s).items() if v is not None and k != "kind"}
            for s in steps
            if s.kind == "do"
        ],
        "waiting": [
            {k: v for k, v in dataclasses.asdict(s).items() if v is not None and k != "kind"}
            for s in steps
            if s.kind == "waiting"
        ],
        "notes": list(notes),
    }


def render(steps: Sequence[Step], *, notes: Sequence[str], header: str) -> str:
    """The default output: a header line, one line per step, then the notes."""
    lines = [header]
    lines.extend(s.text for s in steps)
    if not steps:
        lines.append("nothing to do")
    lines.extend(f"note: {n}" for n in notes)
    return "\n".join(lines) + "\n"


# --- the reads -------------------------------------------------------------------------


async def read_inputs(
    client: KubeClient,
    irep: Mapping[str, Any],
    *,
    manager_namespace: str,
    parent: Mapping[str, Any] | None = None,
) -> Inputs:
    """Read what the controller's pass reads for ``irep``, with get and list only."""
    meta = irep.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    notes: list[str] = []
    try:
        config = (await client.get(CONFIGMAPS, CONFIG_NAME, manager_namespace)).get("data") or {}
    except ApiError as exc:
        raise PlanError(f"get ConfigMap {manager_namespace}/{CONFIG_NAME}: {exc.message}") from None
    try:
        pods = [
            transform_pod(p)
            for p in await client.list_all(PODS, namespace, labelSelector=LABEL_INFERENCE_SERVICE)
        ]
        revisions = list(
            await client.list_all(CONTROLLER_REVISIONS, namespace, labelSelector=REVISION_SELECTOR)
        )
    except ApiError as exc:
        raise PlanError(f"list pods and ControllerRevisions: {exc.message}") from None
    spec = irep.get("spec") or {}
    parent = spec.get("parentRef") if isinstance(spec, Mapping) else None
    isvc = parent.get("name") if isinstance(parent, Mapping) else meta.get("name")
    service = names.traffic_service(str(isvc), str(spec.get("component") or ""))
    try:
        slices = [
            transform_endpoint_slice(s)
            for s in await client.list_all(
                ENDPOINT_SLICES,
                namespace,
                labelSelector=f"{LABEL_INFERENCE_SERVICE},{LABEL_SERVICE_NAME}={service}",
            )
        ]
    except ApiError as exc:
        raise PlanError(f"list EndpointSlices of Service {service}: {exc.message}") from None
    crd, why = await detect_pod_group_crd(client)
    pod_groups: list[Mapping[str, Any]] | None = None
    if crd:
        try:
            pod_groups = list(
                await client.list_all(POD_GROUPS, namespace, labelSelector=POD_GROUP_SELECTOR)
            )
        except ApiError as exc:
            raise PlanError(f"list PodGroups: {exc.message}") from None
    elif "not found" not in why:
        notes.append(f"PodGroups not judged: {why}")
    nodes: dict[str, dict[str, Any]] | None = {}
    wanted_nodes = {
        str((p.get("spec") or {}).get("nodeName"))
        for p in pods
        if (p.get("spec") or {}).get("nodeName")
    }
    for name in sorted(wanted_nodes):
        try:
            node = await client.get(NODES, name)
        except NotFound:
            continue
        except ApiError as exc:
            notes.append(f"nodes not judged: get Node {name}: {exc.message}")
            nodes = None
            break
        assert nodes is not None
        nodes[name] = transform_node(node)
    return Inputs(
        irep=irep,
        pods=pods,
        revisions=revisions,
        slices=slices,
        pod_groups=pod_groups,
        nodes=nodes,
        config=config,
        pod_groups_crd=crd,
        parent=parent,
        notes=notes,
    )


__all__ = [
    "Inputs",
    "PlanError",
    "Planned",
    "Step",
    "node_names",
    "plan_pass",
    "read_inputs",
    "render",
    "report",
    "settings_of",
    "steps_of",
]
