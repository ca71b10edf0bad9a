"""The simulated kubelet's per-pod state machine: pure, driven by explicit wall-clock times.

A :class:`PodRuntime` is what a kubelet knows about one pod it runs: the sandbox, each
container's state, restarts and back-offs. It changes only through :meth:`PodRuntime.advance`
(time passes), :meth:`PodRuntime.set_plans` (failures injected or cleared),
:meth:`PodRuntime.set_images` (a container's image was patched in place),
:meth:`PodRuntime.begin_termination` (the pod was deleted), :meth:`PodRuntime.kill`
(a container restart was injected) and :meth:`PodRuntime.shift` (the node was down).
:mod:`.podstatus` turns it into the pod's API status.

Invariants:
- every transition happens at its *due* time, not at the time ``advance`` is called, so a
  late wake-up does not change the timestamps written, and tests are exact;
- :meth:`PodRuntime.next_due` is the earliest pending transition, or None when the pod will
  not change by itself; the shell sleeps until then, never polls;
- ``restartCount`` only grows; it counts containers created again after one exited, as the
  kubelet counts them.

A pod's life, with the default :class:`Timings` (kubelet-like ones: :meth:`Timings.realistic`):
bound -> (``start_delay``) first status: Pending, containers ``ContainerCreating`` ->
(``running_delay``) sandbox ready, init containers complete, containers running -> (each
container's ``ready_delay``) ready. Failures bend that path: ``ErrImagePull`` alternates
with ``ImagePullBackOff`` (back-off growing from ``backoff_base`` to ``backoff_max``);
``CrashLoopBackOff`` runs ``crash_after``, exits, restarts once at once and then after a
growing back-off; ``NeverReady`` runs and never turns ready.

An image patched into a running container (``spec.containers[*].image``, what an in-place
update does) changes the container's spec hash, and the kubelet restarts it whatever the
restart policy: the old container gets SIGTERM and exits 0 (``Completed``) after
``termination_delay`` (at most the pod's grace period), ready turns False; the new image
is pulled for ``image_pull_delay``, then the container starts with ``restartCount`` + 1,
the old run in ``lastState.terminated``, and is ready after its ``ready_delay``. The new
image follows its own plan: an image that cannot be pulled goes ``ErrImagePull`` /
``ImagePullBackOff``, a crash-looping one crash-loops, back-offs counted afresh (the
kubelet keys them by the spec hash).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Mapping
from typing import Any

from omed.clock import parse_rfc3339, rfc3339
from omed_devcluster.sim.durations import format_duration
from omed_devcluster.sim.failures import ContainerPlan, Failure

WAITING, RUNNING, TERMINATED = "waiting", "running", "terminated"


@dataclasses.dataclass(frozen=True)
class Timings:
    """How long the simulated kubelet takes; seconds. Defaults are test-fast."""

    start_delay: float = 0.05
    """From binding to the first status (Pending, containers ContainerCreating)."""
    running_delay: float = 0.3
    """From binding to the sandbox being ready and the containers starting."""
    ready_delay: float = 0.2
    """From a container starting to it being ready (readiness probe passing)."""
    termination_delay: float = 0.2
    """From deletion to the containers having exited (never more than the grace period)."""
    crash_after: float = 0.5
    """How long a crash-looping container runs before it exits."""
    backoff_base: float = 0.2
    """First CrashLoopBackOff / ImagePullBackOff back-off (the kubelet's is 10s)."""
    backoff_max: float = 2.0
    """Back-off cap (the kubelet's is 5m)."""
    pull_error_duration: float = 0.3
    """How long ErrImagePull shows before it turns into ImagePullBackOff."""
    not_ready_eviction: float | None = None
    """Pods on a NotReady node are evicted (deleted at once) after this long; None: never."""
    image_pull_delay: float = 0.25
    """From a container whose image was patched in place exiting to the new image's container
    starting (the pull and create; ``running_delay`` less ``start_delay`` by default)."""

    @classmethod
    def realistic(cls) -> Timings:
        """Durations close to a real kubelet with small images, for demos."""
        return cls(
            start_delay=0.5,
            running_delay=3.0,
            ready_delay=5.0,
            termination_delay=2.0,
            crash_after=5.0,
            backoff_base=10.0,
            backoff_max=300.0,
            pull_error_duration=2.0,
            not_ready_eviction=300.0,
            image_pull_delay=2.5,
        )

    def backoff(self, attempt: int) -> float:
        """The ``attempt``-th back-off (1-based): doubling from the base, capped."""
        return float(min(self.backoff_base * 2 ** max(attempt - 1, 0), self.backoff_max))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def image_id(image: str) -> str:
    """A stable digest reference for an image: ``ome/serving@sha256:<hex>``."""
    repo = image.split("@", 1)[0]
    slash = repo.rfind("/")
    colon = repo.rfind(":")
    if colon > slash:
        repo = repo[:colon]
    return f"{repo}@sha256:{_digest(image)}"


@dataclasses.dataclass
class ContainerSim:
    """One container's state as the kubelet reports it, and its pending transitions."""

    name: str
    image: str
    plan: ContainerPlan = dataclasses.field(default_factory=ContainerPlan)
    init: bool = False
    """A regular init container: runs to completion before the next one starts."""
    sidecar: bool = False
    """An init container with ``restartPolicy: Always``: starts, then keeps running."""
    state: str = WAITING
    reason: str | None = "ContainerCreating"
    message: str | None = None
    ready: bool = False
    restart_count: int = 0
    container_id: str | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    exit_code: int | None = None
    last_terminated: dict[str, Any] | None = None
    ever_started: bool = False
    crashes: int = 0
    pull_failures: int = 0
    start_at: dt.datetime | None = None
    ready_at: dt.datetime | None = None
    crash_at: dt.datetime | None = None
    backoff_at: dt.datetime | None = None
    """When ErrImagePull turns into ImagePullBackOff."""
    stop_at: dt.datetime | None = None
    """When a container whose image was patched in place has exited (SIGTERM, exit 0)."""
    next_image: str | None = None
    """The image the container runs when it starts next (patched in place, not yet running)."""
    started_image: str | None = None
    """The image of the container's latest run (its ``imageID``); None before the first."""

    @property
    def completed(self) -> bool:
        return self.state == TERMINATED and self.exit_code == 0

    def due(self) -> dt.datetime | None:
        pending = (self.start_at, self.ready_at, self.crash_at, self.backoff_at, self.stop_at)
        times = [t for t in pending if t]
        return min(times) if times else None

    def terminated_record(self) -> dict[str, Any]:
        return {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "message": self.message,
            "startedAt": rfc3339(self.started_at) if self.started_at else None,
            "finishedAt": rfc3339(self.finished_at) if self.finished_at else None,
            "containerID": self.container_id,
        }

    def clear_timers(self) -> None:
        self.start_at = self.ready_at = self.crash_at = self.backoff_at = self.stop_at = None


@dataclasses.dataclass
class PodRuntime:
    """Everything the simulated kubelet tracks for one pod on one node."""

    uid: str
    namespace: str
    name: str
    node: str
    host_ip: str
    pod_ip: str
    bound_at: dt.datetime
    timings: Timings
    restart_policy: str = "Always"
    init_containers: list[ContainerSim] = dataclasses.field(default_factory=list)
    containers: list[ContainerSim] = dataclasses.field(default_factory=list)
    reported: bool = False
    sandbox_ready: bool = False
    start_time: dt.datetime | None = None
    terminate_at: dt.datetime | None = None
    terminated: bool = False
    frozen_at: dt.datetime | None = None

    @classmethod
    def for_pod(
        cls,
        pod: Mapping[str, Any],
        *,
        host_ip: str,
        pod_ip: str,
        now: dt.datetime,
        timings: Timings,
        plans: Mapping[str, ContainerPlan] | None = None,
    ) -> PodRuntime:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        plans = plans or {}
        has_init = bool(spec.get("initContainers"))

        def sim(container: Mapping[str, Any], *, init: bool) -> ContainerSim:
            name = container.get("name") or ""
            sidecar = init and container.get("restartPolicy") == "Always"
            return ContainerSim(
                name=name,
                image=container.get("image") or "",
                plan=plans.get(name, ContainerPlan()),
                init=init and not sidecar,
                sidecar=sidecar,
                reason="PodInitializing" if init or has_init else "ContainerCreating",
            )

        return cls(
            uid=meta.get("uid") or "",
            namespace=meta.get("namespace") or "",
            name=meta.get("name") or "",
            node=spec.get("nodeName") or "",
            host_ip=host_ip,
            pod_ip=pod_ip,
            bound_at=now,
            timings=timings,
            restart_policy=spec.get("restartPolicy") or "Always",
            init_containers=[sim(c, init=True) for c in spec.get("initContainers") or []],
            containers=[sim(c, init=False) for c in spec.get("containers") or []],
        )

    # -- queries ------------------------------------------------------------------------------
    def all_containers(self) -> list[ContainerSim]:
        return [*self.init_containers, *self.containers]

    def container(self, name: str) -> ContainerSim | None:
        return next((c for c in self.all_containers() if c.name == name), None)

    @property
    def initialized(self) -> bool:
        """Every init container done (sidecars: started); trivially so without any."""
        if not self.init_containers:
            return True
        return self.sandbox_ready and all(
            c.completed if c.init else c.ever_started for c in self.init_containers
        )

    def _report_at(self) -> dt.datetime:
        return self.bound_at + dt.timedelta(seconds=self.timings.start_delay)

    def _sandbox_at(self) -> dt.datetime:
        delay = max(self.timings.running_delay, self.timings.start_delay)
        return self.bound_at + dt.timedelta(seconds=delay)

    def next_due(self) -> dt.datetime | None:
        if self.frozen_at is not None or self.terminated:
            return None
        times = [c.due() for c in self.all_containers()]
        if not self.reported:
            times.append(self._report_at())
        if not self.sandbox_ready:
            times.append(self._sandbox_at())
        if self.terminate_at is not None:
            times.append(self.terminate_at)
        present = [t for t in times if t is not None]
        return min(present) if present else None

    # -- transitions --------------------------------------------------------------------------
    def advance(self, now: dt.datetime) -> None:
        """Apply every transition due at or before ``now``, each at its own due time."""
        while (due := self.next_due()) is not None and due <= now:
            self._step(due)

    def _step(self, at: dt.datetime) -> None:
        if self.terminate_at is not None and self.terminate_at <= at:
            self._terminate(at)
            return
        if not self.reported and self._report_at() <= at:
            self.reported = True
            self.start_time = at
            return
        if not self.sandbox_ready and self._sandbox_at() <= at:
            self.reported = True
            self.start_time = self.start_time or at
            self.sandbox_ready = True
            self._start_next(at)
            return
        pending = [(due, i) for i, c in enumerate(self.all_containers()) if (due := c.due())]
        if pending:
            self._step_container(self.all_containers()[min(pending)[1]], at)

    def _start_next(self, at: dt.datetime) -> None:
        """Start the next init container, or, once they are done, every app container."""
        for c in self.init_containers:
            if c.init and c.completed:
                continue
            if c.sidecar and c.ever_started:
                continue
            if c.start_at is None and c.state == WAITING and c.reason == "PodInitializing":
                c.start_at = at
            return
        for c in self.containers:
            if (
                not c.ever_started
                and c.start_at is None
                and c.reason
                in (
                    "ContainerCreating",
                    "PodInitializing",
                )
            ):
                c.start_at = at

    def _step_container(self, c: ContainerSim, at: dt.datetime) -> None:
        if c.stop_at is not None and c.stop_at <= at:
            c.stop_at = None
            self._stop_for_new_image(c, at)
        elif c.start_at is not None and c.start_at <= at:
            c.start_at = None
            self._start(c, at)
        elif c.backoff_at is not None and c.backoff_at <= at:
            c.backoff_at = None
            c.reason = "ImagePullBackOff"
            c.message = f'Back-off pulling image "{c.image}"'
            c.start_at = at + dt.timedelta(seconds=self.timings.backoff(c.pull_failures))
        elif c.crash_at is not None and c.crash_at <= at:
            c.crash_at = None
            self._exit(c, at, exit_code=c.plan.exit_code, crashed=True)
        elif c.ready_at is not None and c.ready_at <= at:
            c.ready_at = None
            c.ready = True

    def _start(self, c: ContainerSim, at: dt.datetime) -> None:
        if c.next_image is not None:
            c.image, c.next_image = c.next_image, None
        if c.plan.failure is Failure.IMAGE_PULL:
            c.pull_failures += 1
            c.state, c.ready = WAITING, False
            c.reason = "ErrImagePull"
            c.message = (
                f'Failed to pull image "{c.image}": rpc error: code = NotFound desc = failed to '
                f'pull and unpack image "{c.image}": not found'
            )
            c.backoff_at = at + dt.timedelta(seconds=self.timings.pull_error_duration)
            return
        if c.ever_started:
            c.restart_count += 1
        c.ever_started = True
        c.started_image = c.image
        c.pull_failures = 0
        c.state, c.reason, c.message, c.exit_code = RUNNING, None, None, None
        c.started_at, c.finished_at = at, None
        c.container_id = "containerd://" + _digest(f"{self.uid}/{c.name}/{c.restart_count}")
        c.ready = False
        if c.init:
            self._exit(c, at, exit_code=0, crashed=False)
            return
        if c.plan.failure is not Failure.NEVER_READY:
            delay = c.plan.ready_delay
            c.ready_at = at + dt.timedelta(
                seconds=self.timings.ready_delay if delay is None else delay
            )
        if c.plan.failure is Failure.CRASH_LOOP:
            run = c.plan.crash_after
            c.crash_at = at + dt.timedelta(seconds=self.timings.crash_after if run is None else run)
        if c.sidecar:
            self._start_next(at)

    def _exit(self, c: ContainerSim, at: dt.datetime, *, exit_code: int, crashed: bool) -> None:
        c.state, c.ready = TERMINATED, False
        c.exit_code = exit_code
        c.reason = "Completed" if exit_code == 0 else "Error"
        c.message = None
        c.finished_at = at
        c.ready_at = c.crash_at = c.stop_at = None
        if c.init and exit_code == 0:
            self._start_next(at)
            return
        restart = (
            self.restart_policy == "Always"
            or c.sidecar
            or (self.restart_policy == "OnFailure" and exit_code != 0)
        )
        if not restart:
            return
        c.last_terminated = c.terminated_record()
        c.crashes += 1 if crashed else 0
        if c.crashes <= 1:
            self._start(c, at)  # the kubelet restarts a first failure without back-off
            return
        backoff = self.timings.backoff(c.crashes - 1)
        c.state, c.reason = WAITING, "CrashLoopBackOff"
        c.message = (
            f"back-off {format_duration(backoff)} restarting failed container={c.name} "
            f"pod={self.name}_{self.namespace}({self.uid})"
        )
        c.start_at = at + dt.timedelta(seconds=backoff)

    def _stop_for_new_image(self, c: ContainerSim, at: dt.datetime) -> None:
        """The old image's container has exited on SIGTERM; pull the new image, then start."""
        c.state, c.ready = TERMINATED, False
        c.exit_code, c.reason, c.message = 0, "Completed", None
        c.finished_at = at
        c.ready_at = c.crash_at = None
        c.last_terminated = c.terminated_record()
        c.crashes = c.pull_failures = 0
        c.start_at = at + dt.timedelta(seconds=self.timings.image_pull_delay)

    def _terminate(self, at: dt.datetime) -> None:
        self.terminate_at = None
        self.terminated = True
        for c in self.all_containers():
            c.clear_timers()
            if c.state == RUNNING:
                c.state, c.exit_code, c.reason, c.message = TERMINATED, 0, "Completed", None
                c.finished_at = at
            c.ready = False

    # -- external events ----------------------------------------------------------------------
    def set_images(
        self,
        images: Mapping[str, str],
        now: dt.datetime,
        *,
        grace: float,
        delay: float | None = None,
    ) -> list[str]:
        """The pod's container images as its spec has them now; returns the containers that
        will restart because their image changed.

        A running container is stopped (after ``delay``, default ``termination_delay``, at
        most ``grace``) and started on the new image; a container that is not running (waiting
        on a pull, a back-off, or its first start) starts on the new image after the pull,
        without back-off. Regular init containers that already ran are left alone, as the
        kubelet does; nothing changes once the pod is terminating.
        """
        if self.terminated or self.terminate_at is not None:
            return []
        changed: list[str] = []
        for c in self.all_containers():
            image = images.get(c.name)
            if not image or image == (c.next_image or c.image):
                continue
            if c.state == RUNNING and c.next_image is not None and image == c.image:
                # Patched back before the old container stopped: the spec hash matches again.
                c.next_image = c.stop_at = None
                if c.plan.failure is Failure.CRASH_LOOP:
                    run = (
                        self.timings.crash_after
                        if c.plan.crash_after is None
                        else c.plan.crash_after
                    )
                    c.crash_at = now + dt.timedelta(seconds=run)
                continue
            if c.init and (c.ever_started or c.state != WAITING):
                continue  # a regular init container that ran is not run again
            if c.state == TERMINATED and c.start_at is None and c.stop_at is None:
                continue  # exited for good (restartPolicy Never or OnFailure)
            changed.append(c.name)
            if not c.ever_started:
                # Never ran: the next (or a retried) pull is of the new image, at once.
                c.image, c.next_image = image, None
                if c.reason in ("ErrImagePull", "ImagePullBackOff"):
                    c.backoff_at, c.pull_failures = None, 0
                    c.start_at = now + dt.timedelta(seconds=self.timings.image_pull_delay)
                continue
            c.next_image = image
            if c.state == RUNNING:
                c.crash_at = None  # SIGTERM comes first
                if c.stop_at is None:
                    wait = self.timings.termination_delay if delay is None else delay
                    c.stop_at = now + dt.timedelta(seconds=max(0.0, min(wait, grace)))
            else:
                # Waiting on a pull, a back-off or a restart: the new spec starts afresh.
                c.backoff_at = None
                c.crashes = c.pull_failures = 0
                c.start_at = now + dt.timedelta(seconds=self.timings.image_pull_delay)
        return changed

    def set_plans(self, plans: Mapping[str, ContainerPlan], now: dt.datetime) -> None:
        """Take new plans; a change applies where it can (see :meth:`ContainerSim` fields)."""
        for c in self.all_containers():
            new = plans.get(c.name, ContainerPlan())
            old, c.plan = c.plan, new
            if new == old or c.state != RUNNING or c.init or c.next_image is not None:
                continue
            if new.failure is Failure.NEVER_READY:
                c.ready, c.ready_at = False, None
            elif not c.ready and c.ready_at is None:
                delay = self.timings.ready_delay if new.ready_delay is None else new.ready_delay
                c.ready_at = now + dt.timedelta(seconds=delay)
            if new.failure is Failure.CRASH_LOOP and c.crash_at is None:
                run = self.timings.crash_after if new.crash_after is None else new.crash_after
                c.crash_at = now + dt.timedelta(seconds=run)
            elif new.failure is not Failure.CRASH_LOOP:
                c.crash_at = None

    def begin_termination(self, now: dt.datetime, *, grace: float, delay: float | None) -> None:
        """The pod was deleted: its containers exit after ``delay`` (at most ``grace``)."""
        if self.terminated or self.terminate_at is not None:
            return
        wanted = self.timings.termination_delay if delay is None else delay
        self.terminate_at = now + dt.timedelta(seconds=max(0.0, min(wanted, grace)))

    def kill(
        self, name: str, now: dt.datetime, *, exit_code: int = 137, reason: str = "Error"
    ) -> int:
        """Make a running container exit and start again at once; returns its restartCount."""
        c = self.container(name)
        if c is None or c.init:
            raise LookupError(f"pod {self.namespace}/{self.name} has no container {name!r}")
        if c.state != RUNNING or self.terminated or self.terminate_at is not None:
            raise LookupError(
                f"container {name!r} of pod {self.namespace}/{self.name} is not running"
            )
        c.state, c.exit_code, c.reason, c.message, c.finished_at = (
            TERMINATED,
            exit_code,
            reason,
            None,
            now,
        )
        c.ready_at = c.crash_at = c.stop_at = None
        c.last_terminated = c.terminated_record()
        self._start(c, now)
        return c.restart_count

    def freeze(self, now: dt.datetime) -> None:
        """The node stopped: nothing changes until :meth:`thaw`."""
        if self.frozen_at is None:
            self.frozen_at = now

    def thaw(self, now: dt.datetime) -> None:
        """The node is back: pending transitions move later by the time it was down."""
        if self.frozen_at is None:
            return
        self.shift(now - self.frozen_at)
        self.frozen_at = None

    def shift(self, delta: dt.timedelta) -> None:
        self.bound_at += delta
        if self.terminate_at is not None:
            self.terminate_at += delta
        for c in self.all_containers():
            for field in ("start_at", "ready_at", "crash_at", "backoff_at", "stop_at"):
                value = getattr(c, field)
                if value is not None:
                    setattr(c, field, value + delta)

    def adopt(self, status: Mapping[str, Any], now: dt.datetime) -> None:
        """Continue a pod another simulator process ran: keep its running containers."""
        if not status.get("containerStatuses"):
            return
        self.reported = self.sandbox_ready = True
        start = status.get("startTime")
        self.start_time = _parse_time(start) if start else now
        by_name = {
            s.get("name"): s
            for s in [*(status.get("initContainerStatuses") or []), *status["containerStatuses"]]
        }
        for c in self.all_containers():
            observed = by_name.get(c.name) or {}
            c.restart_count = int(observed.get("restartCount") or 0)
            c.last_terminated = (observed.get("lastState") or {}).get("terminated")
            state = observed.get("state") or {}
            if "terminated" in state and c.init and state["terminated"].get("exitCode") == 0:
                c.state, c.exit_code, c.reason, c.ever_started = TERMINATED, 0, "Completed", True
            elif "running" in state:
                c.ever_started = True
                c.state, c.reason = RUNNING, None
                c.image = observed.get("image") or c.image  # a newer spec image restarts it
                c.started_image = c.image
                c.container_id = observed.get("containerID")
                c.started_at = _parse_time(state["running"].get("startedAt")) or now
                c.ready = bool(observed.get("ready"))
                if not c.ready and c.plan.failure is not Failure.NEVER_READY:
                    c.ready_at = now + dt.timedelta(seconds=self.timings.ready_delay)
                if c.plan.failure is Failure.CRASH_LOOP:
                    c.crash_at = now + dt.timedelta(seconds=self.timings.crash_after)
            else:
                c.ever_started = c.restart_count > 0 or c.last_terminated is not None
                c.start_at = now
        if not self.initialized:
            self._start_next(now)


def _parse_time(value: Any) -> dt.datetime | None:
    return parse_rfc3339(value) if isinstance(value, str) and value else None
