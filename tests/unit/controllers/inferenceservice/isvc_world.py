"""A pure in-memory world for the InferenceService core's property tests.

:class:`World` holds the objects as the API server would (JSON: the InferenceService, its
runtime, InferenceReplicas by name), reads them into models as the shell does, and runs a pass
the way the reconciler does: :func:`decide`, then each decided write applied to the objects and
its outcome fed to the next decision. It is a model of outcomes, not an API server: a write
does what it says at once, there is no cache lag, and :meth:`World.tick` plays the other
controllers (the InferenceReplica controller reports its replicas ready and lets deleted ones
go; under propagationPolicy Orphan the collector takes owner references off). Every decided
write is kept in :attr:`World.trace` with what the world looked like when it was applied, for
the invariants. Nothing sleeps; time is a field.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import itertools
from typing import Any

from omed.api.constants import LABEL_INFERENCE_SERVICE
from omed.controllers.deletion import FINALIZER_ORPHAN
from omed.controllers.inferenceservice.core.actions import (
    Action,
    AddFinalizer,
    AdoptReplica,
    CreateReplica,
    Decision,
    DeleteReplica,
    PatchReplica,
    RemoveFinalizer,
    ReportRefusals,
    WriteStatus,
)
from omed.controllers.inferenceservice.core.decide import decide
from omed.controllers.inferenceservice.core.model import (
    DecideInput,
    Moment,
    Observed,
    Progress,
    Settings,
)
from omed.controllers.inferenceservice.core.pacing import Pace, PaceMemory
from omed.controllers.inferenceservice.shell.read import (
    read_replica,
    read_runtime_spec,
    read_service,
)

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
PACE = Pace(quiet=5.0, busy=30.0)
SETTINGS = Settings(pace=PACE, deletion_poll=1.0)
RUNTIME: dict[str, Any] = {
    "metadata": {"name": "srt", "namespace": "prod"},
    "spec": {
        "deploymentMode": "OMENative",
        "engineConfig": {"runner": {"name": "ome-container", "image": "ome/srt:1"}},
        "decoderConfig": {
            "leader": {"runner": {"name": "ome-container", "image": "ome/srt:1"}},
            "worker": {"size": 2, "runner": {"name": "ome-container", "image": "ome/srt:1"}},
        },
        "routerConfig": {"runner": {"name": "router", "image": "ome/router:1"}},
    },
}


def service(components: dict[str, int], *, paused: bool = False) -> dict[str, Any]:
    """An OMENative InferenceService with ``components`` (name -> minReplicas)."""
    spec: dict[str, Any] = {"runtime": {"name": "srt"}}
    for name, count in components.items():
        spec[name] = {"minReplicas": count}
    if paused:
        spec["paused"] = True
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": "chat",
            "namespace": "prod",
            "uid": "isvc-uid",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": spec,
    }


def merged(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), value)
    return result


@dataclasses.dataclass(frozen=True)
class Applied:
    """One decided write, with the world it met."""

    action: Action
    monotonic: float
    busy: bool
    service: dict[str, Any] | None
    """The InferenceService just before the write."""
    replicas: dict[str, dict[str, Any]]
    """The InferenceReplicas just before the write."""


@dataclasses.dataclass
class World:
    service_obj: dict[str, Any] | None
    runtime: dict[str, Any] | None = dataclasses.field(default_factory=lambda: RUNTIME)
    replicas: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    monotonic: float = 0.0
    memory: PaceMemory = dataclasses.field(default_factory=PaceMemory)
    trace: list[Applied] = dataclasses.field(default_factory=list)
    decisions: list[Decision] = dataclasses.field(default_factory=list)
    _versions: Any = dataclasses.field(default_factory=lambda: itertools.count(100))

    # -- the objects ------------------------------------------------------------------------

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def _owned(self, uid: str) -> list[dict[str, Any]]:
        return [
            r
            for r in self.replicas.values()
            if any(
                o.get("controller") and o.get("uid") == uid
                for o in r["metadata"].get("ownerReferences") or ()
            )
        ]

    def observe(self) -> Observed:
        assert self.service_obj is not None
        svc = read_service(self.service_obj)
        uid = str(svc.metadata.uid)
        return Observed(
            service=svc,
            runtime=read_runtime_spec(self.runtime),
            replicas={name: read_replica(r) for name, r in self.replicas.items()},
            owned=tuple(read_replica(r) for r in self._owned(uid)),
            default_mode=None,
        )

    # -- a pass -----------------------------------------------------------------------------

    def reconcile(self, *, busy: bool = False) -> Decision:
        """One pass, as the reconciler runs it; the final decision."""
        if self.service_obj is None:
            self.memory = PaceMemory()
            return Decision(actions=(), memory=self.memory)
        observed = self.observe()
        moment = Moment(
            now=NOW + dt.timedelta(seconds=self.monotonic), monotonic=self.monotonic, busy=busy
        )
        progress = Progress()
        for _ in range(8):
            decision = decide(
                DecideInput(
                    observed=observed,
                    settings=SETTINGS,
                    moment=moment,
                    memory=self.memory,
                    progress=progress,
                )
            )
            self.decisions.append(decision)
            self.memory = decision.memory
            if decision.final:
                return decision
            for action in decision.actions:
                progress = self.apply(action, progress, busy=busy)
                if progress.stop is not None:
                    break
            if any(
                isinstance(a, (CreateReplica, PatchReplica, AdoptReplica, DeleteReplica))
                for a in decision.actions
            ):
                progress = dataclasses.replace(progress, replicas_done=True)
        raise AssertionError("a pass that doesn't end")

    def apply(self, action: Action, progress: Progress, *, busy: bool) -> Progress:
        self.trace.append(
            Applied(
                action=action,
                monotonic=self.monotonic,
                busy=busy,
                service=copy.deepcopy(self.service_obj),
                replicas=copy.deepcopy(self.replicas),
            )
        )
        svc = self.service_obj
        assert svc is not None
        if isinstance(action, AddFinalizer):
            svc["metadata"]["finalizers"] = list(action.patch[1]["value"])
            self._bump(svc)
            return dataclasses.replace(progress, finalizer="added", service=read_service(svc))
        if isinstance(action, RemoveFinalizer):
            if self._owned(action.uid):
                return dataclasses.replace(progress, finalizer="held")
            svc["metadata"]["finalizers"] = list(action.patch[1]["value"])
            self._bump(svc)
            self._gone_when_released()
            return dataclasses.replace(progress, finalizer="released")
        if isinstance(action, CreateReplica):
            if action.name in self.replicas:
                return progress  # AlreadyExists
            body = copy.deepcopy(action.body)
            body["metadata"].update(uid=f"uid-{action.name}", generation=1)
            self._bump(body)
            self.replicas[action.name] = body
            return progress
        if isinstance(action, (PatchReplica, AdoptReplica)):
            current = self.replicas.get(action.name)
            if current is None or (
                action.patch["metadata"]["resourceVersion"]
                != current["metadata"]["resourceVersion"]
            ):
                return dataclasses.replace(progress, stop="requeue")
            if isinstance(action, AdoptReplica) and (
                svc["metadata"]["uid"] != action.service_uid
                or svc["metadata"].get("deletionTimestamp")
            ):
                return dataclasses.replace(progress, stop="poll")
            patched = merged(current, action.patch)
            if patched.get("spec") != current.get("spec"):
                patched["metadata"]["generation"] = current["metadata"]["generation"] + 1
            self._bump(patched)
            self.replicas[action.name] = patched
            written = {**progress.written, action.name: read_replica(patched)}
            return dataclasses.replace(progress, written=written)
        if isinstance(action, DeleteReplica):
            current = self.replicas.get(action.name)
            if current is not None and current["metadata"]["uid"] == action.uid:
                current["metadata"].setdefault("deletionTimestamp", "2026-12-01T09:00:00Z")
            return dataclasses.replace(progress, deletes_done=True)
        if isinstance(action, WriteStatus):
            if action.body["metadata"]["resourceVersion"] != svc["metadata"]["resourceVersion"]:
                return dataclasses.replace(progress, status="failed")
            svc["status"] = copy.deepcopy(action.body["status"])
            self._bump(svc)
            return dataclasses.replace(progress, status="written")
        assert isinstance(action, ReportRefusals)
        return progress

    def _gone_when_released(self) -> None:
        svc = self.service_obj
        deleted = svc is not None and svc["metadata"].get("deletionTimestamp")
        if deleted and svc is not None and not svc["metadata"].get("finalizers"):
            self.service_obj = None

    # -- the world moving on ----------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        self.monotonic += seconds

    def tick(self) -> bool:
        """The other controllers: each live replica reports its wanted Instances Ready for its
        generation, a deleted one is drained and goes; under Orphan the collector takes the
        owner references off and lets the service go on. Whether anything moved."""
        moved = False
        for name, irep in list(self.replicas.items()):
            meta = irep["metadata"]
            if meta.get("deletionTimestamp"):
                del self.replicas[name]
                moved = True
                continue
            count = irep["spec"]["replicas"]
            status = {
                "observedGeneration": meta["generation"],
                "replicas": count,
                "readyReplicas": count,
                "servingReplicas": count,
                "updatedReplicas": count,
            }
            if irep.get("status") != status:
                irep["status"] = status
                self._bump(irep)
                moved = True
        svc = self.service_obj
        if svc is not None and FINALIZER_ORPHAN in (svc["metadata"].get("finalizers") or ()):
            moved = True
            for irep in self._owned(str(svc["metadata"]["uid"])):
                irep["metadata"].pop("ownerReferences")
                self._bump(irep)
            svc["metadata"]["finalizers"] = [
                f for f in svc["metadata"]["finalizers"] if f != FINALIZER_ORPHAN
            ]
            self._bump(svc)
            self._gone_when_released()
        return moved

    # -- what a user does -------------------------------------------------------------------

    def edit(self, components: dict[str, int]) -> None:
        """Replace the components (name -> minReplicas); a new generation."""
        svc = self.service_obj
        if svc is None or svc["metadata"].get("deletionTimestamp"):
            return
        spec = {k: v for k, v in svc["spec"].items() if k not in ("engine", "decoder", "router")}
        for name, count in components.items():
            spec[name] = {"minReplicas": count}
        if spec != svc["spec"]:
            svc["spec"] = spec
            svc["metadata"]["generation"] += 1
            self._bump(svc)

    def delete(self, *, orphan: bool) -> None:
        svc = self.service_obj
        if svc is None or svc["metadata"].get("deletionTimestamp"):
            return
        svc["metadata"]["deletionTimestamp"] = "2026-12-01T09:00:00Z"
        if orphan:
            svc["metadata"]["finalizers"] = [
                *(svc["metadata"].get("finalizers") or ()),
                FINALIZER_ORPHAN,
            ]
        self._bump(svc)
        self._gone_when_released()

    # -- what the tests read ----------------------------------------------------------------

    def wanted_components(self) -> set[str]:
        svc = self.service_obj
        assert svc is not None
        return {c for c in ("engine", "decoder", "router") if c in svc["spec"]}

    def replicas_by_component(self) -> dict[str, list[str]]:
        svc = self.service_obj
        assert svc is not None
        found: dict[str, list[str]] = {}
        for irep in self._owned(str(svc["metadata"]["uid"])):
            found.setdefault(irep["spec"]["component"], []).append(irep["metadata"]["name"])
        return found

    def labelled(self) -> list[dict[str, Any]]:
        return [
            r
            for r in self.replicas.values()
            if (r["metadata"].get("labels") or {}).get(LABEL_INFERENCE_SERVICE) == "chat"
        ]
