"""One pass of the InferenceService controller: read the caches into models, ask the core,
do what it decided, and again with the outcomes until it says the pass is over.

It is the only writer of InferenceReplica specs (the InferenceReplica controller writes their
status); each replica carries ``spec.parentRef``, the ``ome.io/inferenceservice`` label, a
controller owner reference and ``ome.io/controller-write: "true"``. Level-triggered: each pass
starts from the caches as they are, and a pass that changes nothing writes nothing.

Deletion beside the garbage collector (docs/controllers.md, "Deletion and the garbage
collector"): the finalizer ``ome.io/inferenceservice-cleanup`` holds the InferenceService
until its replicas are gone, and this controller deletes them itself rather than leave them
to the collector's background deletion, which would start only once the InferenceService is
gone: the service stays visible (Terminating) while its pods drain, its name isn't taken
again over replicas still draining, and the teardown doesn't wait on the collector's
timing. Under ``propagationPolicy: Orphan`` no replica is deleted and an InferenceService
created again adopts them; under ``Foreground`` the collector deletes them itself.

A live InferenceService whose spec the models refuse (``maxReplicas`` below ``minReplicas``,
stored before the webhook checked it or with the webhook off) is left as it is, replicas and
status alike: an ERROR line and a Warning ``InvalidSpec`` event once per resourceVersion, no
retry until it is edited (its update event wakes it): the pass raises
:class:`~omed.workqueue.TerminalError`, counted in
``controller_runtime_terminal_reconcile_errors_total``. A deleted one is read with an empty
spec and finalized.

A write the API server refuses for good (:mod:`omed.controllers.refusals`) doesn't stop the
other components' writes; the pass reports it (a Warning ``WriteRefused`` event on the
InferenceService, a WARNING line), the status it writes at its end shows it as condition
``WriteRefused``, and the key goes back through the workqueue's rate limiter.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from omed.api.constants import ANNOTATION_RUNTIME_SYNC, KIND_CLUSTER_SERVING_RUNTIME
from omed.api.inferencereplica import InferenceReplica, inference_replica_name
from omed.api.inferenceservice import InferenceService
from omed.clock import Clock
from omed.controllers.inferenceservice.core.actions import ReportRefusals
from omed.controllers.inferenceservice.core.decide import decide
from omed.controllers.inferenceservice.core.model import (
    DecideInput,
    Moment,
    Observed,
    Progress,
    Settings,
)
from omed.controllers.inferenceservice.core.names import (
    DELETION_POLL,
    EVENT_SPEC_INVALID,
    MSG_SPEC_INVALID,
)
from omed.controllers.inferenceservice.core.pacing import Pace, PaceMemory
from omed.controllers.inferenceservice.core.pinning import (
    EVENT_RUNTIME_DRIFTED,
    STATUS_PINNED,
    STATUS_TOKEN,
    Pin,
    PinInput,
    resolve,
)
from omed.controllers.inferenceservice.shell.executor import Executor
from omed.controllers.inferenceservice.shell.read import (
    read_replica,
    read_runtime_spec,
    read_service,
)
from omed.controllers.pacing import STATUS_PACE, STATUS_PACE_BUSY
from omed.controllers.refusals import report
from omed.controllers.runtimerevision.core.model import Source
from omed.controllers.runtimerevision.core.snapshot import content_hash, revision_name
from omed.events import WARNING, EventSink
from omed.informers import OWNER_UID, SharedInformer
from omed.informers.transform import Obj
from omed.kube.client import KubeClient
from omed.log import kv
from omed.workqueue import Result, TerminalError

log = logging.getLogger("omed.controllers.inferenceservice")

DefaultMode = Callable[[], Awaitable[str | None]]

MAX_STEPS: Final = 8
"""More decisions than a pass makes (four at most): a guard against a core that never ends."""

SETTINGS: Final = Settings(
    pace=Pace(quiet=STATUS_PACE, busy=STATUS_PACE_BUSY), deletion_poll=DELETION_POLL
)


def _name_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name"))


class InferenceServiceReconciler:
    def __init__(
        self,
        *,
        client: KubeClient,
        services: SharedInformer,
        replicas: SharedInformer,
        runtimes: SharedInformer,
        cluster_runtimes: SharedInformer,
        default_mode: DefaultMode,
        clock: Clock,
        busy: Callable[[], bool] = lambda: False,
        events: EventSink | None = None,
        requeues: Callable[[str], int] = lambda _key: 0,
        settings: Settings = SETTINGS,
        revisions: SharedInformer | None = None,
        revision_namespace: str | None = None,
    ) -> None:
        """``revisions`` (the runtime revisions in ``revision_namespace``, the manager's)
        lets services pin a runtime revision; without it every service renders from the
        live runtime."""
        self._executor = Executor(client=client)
        self._events = events
        self._report = functools.partial(report, events=events, logger=log)
        """:func:`omed.controllers.refusals.report` to this controller's events and log."""
        self._requeues = requeues
        """The key's back-off step in the workqueue's rate limiter (for the refusal log)."""
        self._busy = busy
        self._services = services.store
        self._replicas = replicas.store
        self._runtimes = runtimes.store
        self._cluster_runtimes = cluster_runtimes.store
        self._default_mode = default_mode
        self._clock = clock
        self._settings = settings
        self._memory: dict[str, PaceMemory] = {}
        """Per key, what the pacing remembers between passes (the core's, kept as it left it)."""
        self._invalid: dict[str, str] = {}
        """Per key, the resourceVersion whose spec was reported unreadable (said once)."""
        self._revisions = revisions.store if revisions is not None else None
        self._revision_namespace = revision_namespace or ""
        self._drift_told: dict[str, str] = {}
        """Per key, the RuntimeDrifted message last sent as an event (sent once while it holds)."""

    def _runtime(self, service: InferenceService) -> Obj | None:
        ref = service.spec.runtime
        if ref is None or not ref.name:
            return None
        if ref.kind != KIND_CLUSTER_SERVING_RUNTIME:
            found = self._runtimes.get(f"{service.metadata.namespace}/{ref.name}")
            if found is not None or ref.kind:
                return found
        return self._cluster_runtimes.get(ref.name)

    async def _observe(self, raw: Obj) -> Observed:
        service = read_service(raw)
        namespace, name = service.metadata.namespace, str(service.metadata.name)
        deleted = service.metadata.deletion_timestamp is not None
        # A deletion reads neither the runtime nor the mode: it can't wait on either.
        runtime = None if deleted else self._runtime(service)
        by_name: dict[str, InferenceReplica] = {}
        wanted = [inference_replica_name(name, c) for c in service.spec.components()]
        fronted = [ref.name for ref in service.spec.replica_refs or ()]
        for replica_name in dict.fromkeys([*wanted, *fronted]):
            found = self._replicas.get(f"{namespace}/{replica_name}")
            if found is not None:
                by_name[replica_name] = read_replica(found)
        # Read once each: a replica of a wanted name is usually an owned one too (one store,
        # and nothing awaited between the two reads, so they are the same object).
        owned = tuple(
            by_name.get(_name_of(o)) or read_replica(o)
            for o in self._replicas.by_index(OWNER_UID, str(service.metadata.uid))
        )
        pin = None if deleted else self._pin(raw, runtime)
        rendered = runtime
        if pin is not None and pin.source == "revision" and pin.spec is not None:
            rendered = {"spec": pin.spec}
        return Observed(
            service=service,
            runtime=read_runtime_spec(rendered),
            replicas=by_name,
            owned=owned,
            default_mode=None if deleted else await self._default_mode(),
            pin=pin,
        )

    def _pin(self, raw: Obj, runtime: Obj | None) -> Pin | None:
        """The pin of this pass (:mod:`..core.pinning`), from the service's fields as stored
        (omed's models don't carry them), the live runtime and the revision cache."""
        if self._revisions is None:
            return None
        ref = (raw.get("spec") or {}).get("runtime") or {}
        status = raw.get("status") or {}
        annotations = (raw.get("metadata") or {}).get("annotations") or {}

        def text(value: object) -> str | None:
            return value if isinstance(value, str) and value else None

        auto_sync = ref.get("autoSync") is not False
        live: Mapping[str, Any] | None = None
        live_revision = live_hash = where = None
        if runtime is not None:
            meta = runtime.get("metadata") or {}
            namespace = str(meta.get("namespace") or "")
            source = Source(
                kind="ServingRuntime" if namespace else "ClusterServingRuntime",
                namespace=namespace,
                name=str(meta.get("name") or ""),
            )
            spec = runtime.get("spec")
            live = spec if isinstance(spec, Mapping) else {}
            if not auto_sync:  # the hash is of use only to a pin
                live_hash = content_hash(live)
                live_revision = revision_name(source, live_hash)
            where = f"{source.kind} {f'{namespace}/' if namespace else ''}{source.name}"
        explicit, pinned = text(ref.get("revision")), text(status.get(STATUS_PINNED))
        revisions: dict[str, Mapping[str, Any]] = {}
        for name in {explicit, pinned, live_revision} - {None}:
            found = self._revisions.get(f"{self._revision_namespace}/{name}")
            data = (found or {}).get("data")
            if found is not None and isinstance(data, Mapping):
                revisions[str(name)] = data
        return resolve(
            PinInput(
                auto_sync=auto_sync,
                explicit=explicit,
                pinned=pinned,
                token=text(annotations.get(ANNOTATION_RUNTIME_SYNC)),
                last_token=text(status.get(STATUS_TOKEN)),
                runtime=where or str(ref.get("name") or ""),
                live=live,
                live_revision=live_revision,
                live_hash=live_hash,
                revisions=revisions,
            )
        )

    def _tell_drift(self, key: str, raw: Obj, pin: Pin | None) -> None:
        """The Warning RuntimeDrifted once per drift (its message), as the condition turns
        True; nothing while it stays."""
        drift = pin.drift if pin is not None else None
        if drift is None or not drift.drifted:
            self._drift_told.pop(key, None)
            return
        if self._drift_told.get(key) == drift.message:
            return
        self._drift_told[key] = drift.message
        if self._events is not None:
            self._events.event(
                raw, type=WARNING, reason=EVENT_RUNTIME_DRIFTED, message=drift.message[:1000]
            )

    def _spec_invalid(self, key: str, raw: Obj, err: ValidationError) -> None:
        version = str((raw.get("metadata") or {}).get("resourceVersion") or "")
        if self._invalid.get(key) == version:
            return  # said once for this version; replica events would repeat it
        self._invalid[key] = version
        message = "; ".join(
            f"{'.'.join(str(part) for part in e['loc'])}: {e['msg'].removeprefix('Value error, ')}"
            for e in err.errors()[:3]
        )
        log.error(MSG_SPEC_INVALID, extra=kv(key=key, error=str(err)[:1000]))
        if self._events is not None:
            self._events.event(raw, type=WARNING, reason=EVENT_SPEC_INVALID, message=message[:1000])

    async def reconcile(self, key: str) -> Result:
        raw = self._services.get(key)
        if raw is None:
            self._memory.pop(key, None)  # gone: nothing is left to pace
            self._invalid.pop(key, None)
            self._drift_told.pop(key, None)
            return Result()
        try:
            observed = await self._observe(raw)
        except ValidationError as err:
            self._spec_invalid(key, raw, err)
            # Until it is edited: its update event wakes the key.
            raise TerminalError(f"{key}: {err}"[:1000], reported=True) from err
        self._invalid.pop(key, None)
        self._tell_drift(key, raw, observed.pin)
        moment = Moment(now=self._clock.now(), monotonic=self._clock.monotonic(), busy=self._busy())
        progress = Progress()
        memory = self._memory.get(key, PaceMemory())
        for _ in range(MAX_STEPS):
            decision = decide(
                DecideInput(
                    observed=observed,
                    settings=self._settings,
                    moment=moment,
                    memory=memory,
                    progress=progress,
                )
            )
            memory = decision.memory
            if decision.final:
                break
            progress = await self._executor.run(decision.actions, progress)
        else:
            msg = f"the InferenceService core made more than {MAX_STEPS} decisions for {key}"
            raise RuntimeError(msg)
        if memory.last_write is None:
            self._memory.pop(key, None)
        else:
            self._memory[key] = memory
        for action in decision.actions:
            if isinstance(action, ReportRefusals):
                self._report(action.refusals, key=key, involved=raw, requeues=self._requeues(key))
        if decision.requeue:
            return Result(requeue=True)  # the rate limiter's back-off, not the pace's timer
        if decision.requeue_after:
            return Result(requeue_after=decision.requeue_after)
        return Result()
