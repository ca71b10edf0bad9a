"""A :class:`~.kubelet.PodRuntime` as the pod status the kubelet would write, and the write.

The simulated kubelet owns some of a pod's status and must leave the rest alone:

- it owns ``phase``, ``hostIP(s)``, ``podIP(s)``, ``startTime``, ``observedGeneration``,
  ``containerStatuses``, ``initContainerStatuses`` and the conditions PodScheduled,
  PodReadyToStartContainers, Initialized, ContainersReady and Ready;
- every other condition (readiness gates in particular) belongs to someone else.

So the write is a *strategic merge patch* of pods/status, where ``conditions`` merge by
``type``: conditions the simulator does not name are untouched, however they changed since it
last looked. Keys the simulator clears are sent as ``null`` (a merge patch deletes them, a
replaced list decodes them as absent), so the result does not depend on whether a list
merges or replaces.

Ready is computed as the kubelet computes it: True only when every container is ready and
every ``spec.readinessGates`` condition type has a True condition, with the kubelet's reasons
and messages. A condition's ``lastTransitionTime`` moves only when its status changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from omed.clock import rfc3339
from omed_devcluster.sim.kubelet import RUNNING, TERMINATED, WAITING, ContainerSim, PodRuntime
from omed_devcluster.sim.kubelet import image_id as _image_id

OWNED_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)
OWNED_FIELDS = (
    "phase",
    "hostIP",
    "hostIPs",
    "podIP",
    "podIPs",
    "startTime",
    "observedGeneration",
    "containerStatuses",
    "initContainerStatuses",
)

_Cond = tuple[str, str | None, str | None]  # status, reason, message


def phase(rt: PodRuntime) -> str:
    """The kubelet's ``getPhase`` for the containers' states."""
    apps = rt.containers
    if rt.terminated:
        return "Succeeded" if all(c.exit_code in (0, None) for c in apps) else "Failed"
    if not rt.initialized:
        return "Pending"
    if any(c.state == WAITING and c.last_terminated is None for c in apps):
        return "Pending"
    if any(c.state == RUNNING for c in apps):
        return "Running"
    if any(c.state == WAITING for c in apps):
        return "Running"  # restarting after an exit
    failed = any(c.exit_code not in (0, None) for c in apps)
    if rt.restart_policy == "Always" or (rt.restart_policy == "OnFailure" and failed):
        return "Running"
    return "Failed" if failed else "Succeeded"


def _container_status(c: ContainerSim, *, started_pod: bool) -> dict[str, Any]:
    state: dict[str, Any] = {"waiting": None, "running": None, "terminated": None}
    if c.state == RUNNING:
        state["running"] = {"startedAt": rfc3339(c.started_at) if c.started_at else None}
    elif c.state == TERMINATED:
        state["terminated"] = c.terminated_record()
    else:
        state["waiting"] = {"reason": c.reason, "message": c.message}
    return {
        "name": c.name,
        "image": c.image,
        "imageID": _image_id(c.started_image or c.image) if c.ever_started else "",
        "containerID": c.container_id if c.ever_started and started_pod else None,
        "ready": c.ready,
        "started": c.state == RUNNING,
        "restartCount": c.restart_count,
        "state": state,
        "lastState": {"terminated": c.last_terminated, "waiting": None, "running": None},
    }


def _conditions(rt: PodRuntime, pod: Mapping[str, Any], *, terminal: bool) -> dict[str, _Cond]:
    prior = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    conds: dict[str, _Cond] = {
        "PodScheduled": ("True", None, None),
        "PodReadyToStartContainers": ("True" if rt.sandbox_ready else "False", None, None),
    }
    incomplete = [c.name for c in rt.init_containers if not (c.completed or c.ever_started)]
    if rt.initialized or terminal:
        conds["Initialized"] = ("True", None, None)
    else:
        names = " ".join(incomplete)
        conds["Initialized"] = (
            "False",
            "ContainersNotInitialized",
            f"containers with incomplete status: [{names}]",
        )
    unready = [c.name for c in rt.containers if not c.ready] + [
        c.name for c in rt.init_containers if c.sidecar and not c.ready
    ]
    if terminal:
        containers: _Cond = ("False", "PodCompleted", None)
    elif unready:
        message = f"containers with unready status: [{' '.join(unready)}]"
        containers = ("False", "ContainersNotReady", message)
    else:
        containers = ("True", None, None)
    conds["ContainersReady"] = containers
    gate_problems = []
    for gate in (pod.get("spec") or {}).get("readinessGates") or []:
        kind = gate.get("conditionType")
        cond = prior.get(kind)
        if cond is None:
            gate_problems.append(
                f'corresponding condition of pod readiness gate "{kind}" does not exist.'
            )
        elif cond.get("status") != "True":
            gate_problems.append(
                f'the status of pod readiness gate "{kind}" is not "True", but {cond.get("status")}'
            )
    if containers[0] != "True":
        ready = containers
    elif gate_problems:
        ready = ("False", "ReadinessGatesNotReady", ", ".join(gate_problems))
    else:
        ready = ("True", None, None)
    conds["Ready"] = ready
    return conds


def _condition_list(
    conds: Mapping[str, _Cond],
    pod: Mapping[str, Any],
    *,
    now: dt.datetime,
    generation: int | None,
) -> list[dict[str, Any]]:
    prior = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    out = []
    for kind in OWNED_CONDITIONS:
        if kind not in conds:
            continue
        status, reason, message = conds[kind]
        old = prior.get(kind) or {}
        changed = old.get("status") != status
        cond: dict[str, Any] = {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(now)
            if changed or not old.get("lastTransitionTime")
            else old["lastTransitionTime"],
        }
        if generation is not None:
            cond["observedGeneration"] = generation
        out.append(cond)
    return out


def desired_status(rt: PodRuntime, pod: Mapping[str, Any], *, now: dt.datetime) -> dict[str, Any]:
    """The status fields the kubelet owns, for ``rt`` now; {} before its first report."""
    if not rt.reported:
        return {}
    meta = pod.get("metadata") or {}
    generation = meta.get("generation")
    generation = int(generation) if generation is not None else None
    current_phase = phase(rt)
    terminal = current_phase in ("Succeeded", "Failed")
    conds = _conditions(rt, pod, terminal=terminal)
    status: dict[str, Any] = {
        "phase": current_phase,
        "hostIP": rt.host_ip,
        "hostIPs": [{"ip": rt.host_ip}],
        "startTime": rfc3339(rt.start_time) if rt.start_time else None,
        "conditions": _condition_list(conds, pod, now=now, generation=generation),
        "containerStatuses": sorted(
            (_container_status(c, started_pod=rt.sandbox_ready) for c in rt.containers),
            key=lambda s: str(s["name"]),
        ),
    }
    if rt.sandbox_ready:
        status["podIP"] = rt.pod_ip
        status["podIPs"] = [{"ip": rt.pod_ip}]
    if rt.init_containers:
        status["initContainerStatuses"] = [
            _container_status(c, started_pod=rt.sandbox_ready) for c in rt.init_containers
        ]
    if generation is not None:
        status["observedGeneration"] = generation
    return status


def _strip(value: Any) -> Any:
    """Drop null values and empty maps, the way a round trip through the API server does."""
    if isinstance(value, Mapping):
        stripped = {k: _strip(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in stripped.items() if v != {}}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def status_matches(desired: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the pod's status already says what ``desired`` would write."""
    observed = dict(pod.get("status") or {})
    by_type = {c.get("type"): c for c in observed.get("conditions") or []}
    wanted = _strip(desired)
    if "conditions" in wanted:
        observed["conditions"] = [by_type.get(c["type"], {}) for c in wanted["conditions"]]
    have = _strip({k: observed.get(k) for k in wanted})
    return bool(have == wanted)
