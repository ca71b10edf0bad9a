"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Why this module exists: the chart runs three manager replicas, and only one of them may run
the controllers, or two processes would race each other's writes to the same objects. The
replicas elect a leader through the Lease ``ome-controller-manager-leader-lock``, exactly as
client-go's ``tools/leaderelection`` does, so that an omed replica and an upstream (Go) OME
replica share the Lease correctly during a migration.

Invariants:

* A candidate takes the Lease only when there is none, when it names this candidate, when
  its holder is empty (released), or when its record (the whole ``spec``) has not changed,
  *as this candidate observed it*, for the record's ``leaseDurationSeconds`` measured on the
  candidate's own monotonic clock since it last saw a change (client-go's ``observedTime``).
  The remote ``renewTime`` is never compared with local time, so clock skew between nodes
  cannot cause a takeover.
* Every write is optimistic: a PUT carrying the ``resourceVersion`` this candidate last read
  (or wrote), or a create that fails when the Lease already exists. Two candidates can't both
  succeed from the same observed state.
* The leader renews as client-go does: a renew cycle starts one retry period after the last
  success and retries every retry period until it succeeds; the leader stops leading
  (``is_leader`` false, ``leader_election_master_status`` 0, ``on_stopped_leading``,
  :class:`LeaderElectionLost`) when a cycle has run ``renew_deadline`` without success. On
  top of client-go, it also stops no later than ``lease_duration`` after the *start* of its
  last successful renew: a standby starts its ``lease_duration`` only once it sees that write,
  so the old leader has given up before a standby may take over, whatever the timings
  (given monotonic clocks that run at about the same rate). It also stops at once when it
  reads a Lease held by someone else.
* :meth:`LeaderElector.release` writes ``holderIdentity: ""`` with the resourceVersion of
  this candidate's last write, so it never clobbers a Lease that someone else has taken.
* The write fence (:meth:`LeaderElector.check_fence`): a leader may send a write only while
  its monotonic clock is before ``last_renew + lease_duration - fence_margin``, where
  ``fence_margin`` is ``lease_duration - renew_deadline`` (so: less than one renew deadline
  after the start of its last successful renew). A standby can take over no earlier than
  ``last_renew + lease_duration`` on a clock running at the same rate, so a write that passes
  the fence has at least the margin to reach the API server before another leader may act.
  The renew loop alone can't promise that: a process whose event loop stalled (stopped,
  starved, swapped out) runs its queued writes the instant it resumes, before the loop gets
  to notice that the renew deadline has passed. A write the fence refuses raises
  :class:`WriteFenced` without being sent; the renew loop then ends the leadership as
  before (``leader election lost``), unless a renew succeeds first.

Log lines (exact strings, see the ``MSG_*`` constants): ``attempting to acquire leader
lease``, ``successfully acquired lease``, ``failed to renew lease`` (the leader gives up),
``released leader lease``, ``failed to release leader lease``, ``new leader elected``,
``failed to acquire or renew lease`` for a single failed attempt (info: it names the API
error), and ``lease too old to write; refusing writes until it is renewed`` when the
fence refuses a write. ``leader election lost`` is the message of
:class:`LeaderElectionLost`, which the manager logs with ``Failed to start manager``.

Note: in upstream OME a leader that stops keeps its Lease until it expires (upstream leaves
client-go's ``ReleaseOnCancel`` off). :meth:`release` exists for a graceful handover;
whether the manager calls it on stop is the manager's decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
import os
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import aiohttp
from prometheus_client import Gauge

from omed.clock import Clock, RealClock, within
from omed.kube.api import ObjectWriter
from omed.kube.errors import ApiError, Conflict, NotFound
from omed.kube.resources import LEASES
from omed.log import kv
from omed.metrics import REGISTRY

log = logging.getLogger("omed.leaderelection")

DEFAULT_LEASE_NAME = "ome-controller-manager-leader-lock"
JITTER_FACTOR = 1.2
"""client-go's ``leaderelection.JitterFactor``: a candidate waits retry x [1, 2.2) between tries."""

MSG_ATTEMPTING = "attempting to acquire leader lease"
MSG_ACQUIRED = "successfully acquired lease"
MSG_RENEW_FAILED = "failed to renew lease"
MSG_ATTEMPT_FAILED = "failed to acquire or renew lease"
MSG_RELEASED = "released leader lease"
MSG_RELEASE_FAILED = "failed to release leader lease"
MSG_NEW_LEADER = "new leader elected"
MSG_FENCED = "lease too old to write; refusing writes until it is renewed"
LOST_MESSAGE = "leader election lost"

MASTER_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
    "1 indicates master. 'name' is the string used to identify the lease. Please make sure "
    "to group by name.",
    ["name"],
    registry=REGISTRY,
)

T = TypeVar("T")

# What one failed API round trip can raise; anything else is a bug and propagates.
_ATTEMPT_ERRORS: tuple[type[BaseException], ...] = (
    ApiError,
    aiohttp.ClientError,
    OSError,
    TimeoutError,
)


class LeaderElectionLost(Exception):
    """The leader could not renew its Lease within the renew deadline, or lost it."""

    def __init__(self, message: str = LOST_MESSAGE) -> None:
        super().__init__(message)


class WriteFenced(Exception):
    """A write refused before it was sent: this replica can no longer be sure it leads.

    Not an :class:`~omed.kube.errors.ApiError`: the API server never saw the request, and
    no caller may take it for a refusal of the API server's.
    """


LeaseClient = ObjectWriter
"""The part of :class:`omed.kube.client.KubeClient` the elector uses: get, create and
replace of its Lease."""


def default_identity() -> str:
    """``<pod name>_<uuid4>``: the pod name from ``$POD_NAME``, else the host name."""
    pod = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{pod}_{uuid.uuid4()}"


def micro_time(value: dt.datetime) -> str:
    """Kubernetes MicroTime: ``2026-01-02T03:04:05.123456Z``."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_record(lease: Mapping[str, Any] | None) -> dict[str, Any]:
    """The leader election record of a Lease: its spec without null fields."""
    spec = (lease or {}).get("spec") or {}
    return {k: v for k, v in spec.items() if v is not None}


class LeaderElector:
    """One candidate for one Lease; see the module docstring for the rules it keeps.

    Use :meth:`run`, or :meth:`acquire` then :meth:`hold`. ``on_stopped_leading`` is called
    (synchronously) whenever this candidate stops leading: lost, released, or its ``hold``
    cancelled. ``on_new_leader`` is called with the holder identity whenever the observed
    holder changes, this candidate included (client-go's ``OnNewLeader``).
    """

    def __init__(
        self,
        client: LeaseClient,
        *,
        namespace: str,
        name: str = DEFAULT_LEASE_NAME,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not namespace or not name:
            raise ValueError("leader election needs a Lease namespace and name")
        if min(lease_duration, renew_deadline, retry_period) <= 0:
            raise ValueError("lease duration, renew deadline and retry period must be positive")
        if renew_deadline >= lease_duration:
            raise ValueError("the lease duration must be longer than the renew deadline")
        self._client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock: Clock = clock or RealClock()
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._rand = rand
        # The Lease as last read or written: its resourceVersion guards the next write.
        self._lease: dict[str, Any] | None = None
        self._observed: dict[str, Any] = {}
        self._observed_at = -math.inf
        self._reported_leader: str | None = None
        self._leading = False
        self._last_renew = -math.inf
        self._fence_logged = -math.inf
        self._lock = asyncio.Lock()
        self._not_leading = asyncio.Event()  # wakes a sleeping hold() when released
        self._not_leading.set()
        MASTER_STATUS.labels(name).set(0)

    # -- state --------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        """True from a successful :meth:`acquire` until leadership is lost or given up."""
        return self._leading

    @property
    def leader(self) -> str:
        """The holder identity this candidate last observed ("" for none)."""
        return str(self._observed.get("holderIdentity") or "")

    @property
    def last_renew(self) -> float:
        """Monotonic start of the last successful acquire or renew (-inf before any).

        A health check can compare it with ``clock.monotonic()``, as client-go's
        ``HealthzAdaptor`` does.
        """
        return self._last_renew

    @property
    def lease(self) -> Mapping[str, Any] | None:
        """The Lease as this candidate last read or wrote it."""
        return self._lease

    @property
    def fence_margin(self) -> float:
        """How long before a standby may take over the fence shuts: ``lease_duration -
        renew_deadline``, the slack client-go's timings already keep between a leader giving
        up and a standby taking over."""
        return self.lease_duration - self.renew_deadline

    def may_write(self) -> bool:
        """Whether a write sent now is safe: leading, and before the fence (module docstring)."""
        return self._leading and self._clock.monotonic() < (
            self._last_renew + self.lease_duration - self.fence_margin
        )

    def check_fence(self) -> None:
        """Raise :class:`WriteFenced` unless :meth:`may_write`; call it right before sending.

        Synchronous on purpose: between this check and the request leaving there must be no
        await, so a loop that stalls can't resume in between. A refusal doesn't end the
        leadership by itself: a renew that succeeds opens the fence again, and one that
        doesn't ends it within a retry period (the renew deadline), as it would without
        the fence. The first refusal after each renew is logged.
        """
        if self.may_write():
            return
        if self._leading and self._fence_logged != self._last_renew:
            self._fence_logged = self._last_renew
            age = self._clock.monotonic() - self._last_renew
            log.info(
                MSG_FENCED,
                extra=kv(
                    lease=self._describe(),
                    identity=self.identity,
                    sinceRenew=f"{age:.3f}s",
                    fence=f"{self.lease_duration - self.fence_margin:g}s",
                ),
            )
        raise WriteFenced(
            f"write refused: {self.identity} can't be sure it still holds the Lease "
            f"{self._describe()}"
        )

    def lease_valid(self) -> bool:
        """Whether the observed record is still within its lease duration on our clock."""
        duration = float(self._observed.get("leaseDurationSeconds") or 0)
        return self._observed_at + duration > self._clock.monotonic()

    # -- the election -------------------------------------------------------------------------
    async def run(self, on_started_leading: Callable[[], Awaitable[None]] | None = None) -> None:
        """Acquire, run ``on_started_leading`` while holding, raise when leadership is lost.

        Never returns normally unless the Lease is released concurrently: it raises
        :class:`LeaderElectionLost`, the exception of ``on_started_leading``, or
        CancelledError. It doesn't release the Lease; call :meth:`release` for that.
        """
        await self.acquire()
        holding = asyncio.create_task(self.hold(), name=f"leader-election-{self.name}")
        work: asyncio.Future[None] | None = (
            asyncio.ensure_future(on_started_leading()) if on_started_leading is not None else None
        )
        try:
            if work is None:
                await holding
                return
            await asyncio.wait({holding, work}, return_when=asyncio.FIRST_COMPLETED)
            if work.done() and not work.cancelled():
                failure = work.exception()
                if failure is not None:
                    raise failure
            await holding
        finally:
            for task in (holding, work):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    async def acquire(self) -> None:
        """Try every jittered retry period until this candidate holds the Lease."""
        log.info(MSG_ATTEMPTING, extra=kv(lease=self._describe(), identity=self.identity))
        while True:
            started = self._clock.monotonic()
            if await self._attempt(timeout=self.renew_deadline):
                self._start_leading(started)
                log.info(MSG_ACQUIRED, extra=kv(lease=self._describe(), identity=self.identity))
                return
            await self._clock.sleep(self.retry_period * (1.0 + JITTER_FACTOR * self._rand()))

    async def hold(self) -> None:
        """Renew every retry period; raise LeaderElectionLost when renewal fails for too long.

        Returns normally only when :meth:`release` gave the Lease up meanwhile.
        """
        if not self._leading:
            raise RuntimeError("hold() needs leadership: call acquire() first")
        try:
            while True:
                await self._pause(self.retry_period)
                reason = await self._renew_within_deadline()
                if not self._leading:
                    return  # released meanwhile
                if reason is not None:
                    log.info(
                        MSG_RENEW_FAILED,
                        extra=kv(lease=self._describe(), identity=self.identity, reason=reason),
                    )
                    raise LeaderElectionLost()
        finally:
            self._stop_leading()

    async def release(self) -> bool:
        """Give the Lease up: holderIdentity "", leaseDurationSeconds 1, renewTime now.

        Keeps leaseTransitions, as client-go's ReleaseOnCancel does, so a standby takes the
        Lease at its next try. Returns whether the Lease is (now) not ours; a no-op when this
        candidate's last observed record doesn't name it.
        """
        async with self._lock:
            if self._lease is None or self.leader != self.identity:
                self._stop_leading()
                return True
            now = micro_time(self._clock.now())
            record = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": int(self._observed.get("leaseTransitions") or 0),
            }
            try:
                released = await self._within(self._release(record), self.renew_deadline)
            except _ATTEMPT_ERRORS as err:
                log.error(MSG_RELEASE_FAILED, extra=kv(lease=self._describe(), error=str(err)))
                self._stop_leading()
                return False
            self._stop_leading()
            if released:
                log.info(MSG_RELEASED, extra=kv(lease=self._describe(), identity=self.identity))
            return True

    async def _release(self, record: Mapping[str, Any]) -> bool:
        """Write the released record; whether it was ours to release."""
        try:
            await self._write(record)
            return True
        except Conflict:
            # Our last write may have landed unseen (a cancelled renew): read and retry once.
            self._observe(await self._client.get(LEASES, self.name, self.namespace))
            if self.leader != self.identity:
                return False
            await self._write(record)
            return True

    # -- internals ----------------------------------------------------------------------------
    def _describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _start_leading(self, attempt_started: float) -> None:
        self._leading = True
        self._not_leading.clear()
        self._last_renew = attempt_started
        MASTER_STATUS.labels(self.name).set(1)

    def _stop_leading(self) -> None:
        if not self._leading:
            return
        self._leading = False
        self._not_leading.set()
        MASTER_STATUS.labels(self.name).set(0)
        if self._on_stopped_leading is not None:
            self._on_stopped_leading()

    async def _renew_within_deadline(self) -> str | None:
        """One renew cycle, as client-go's ``renew``: retry every retry period until a renew
        succeeds (None) or ``renew_deadline`` has passed since this cycle began (the reason).

        The deadline runs from the start of the cycle, not from the last success: a slow
        but successful renew (an API server just back from a restart) must not cost the
        next cycle its time.
        """
        # Safety cap: never lead past one lease duration after the start of the last
        # successful renew, which is before any standby may take over (it starts counting
        # only once it has seen that write).
        deadline = min(
            self._clock.monotonic() + self.renew_deadline, self._last_renew + self.lease_duration
        )
        while True:
            if not self._leading:
                return None
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return "renew deadline exceeded"
            started = self._clock.monotonic()
            if await self._attempt(timeout=remaining, renewing=True):
                self._last_renew = started
                return None
            if self.leader != self.identity and self.lease_valid():
                return f"lease is held by {self.leader}"
            remaining = deadline - self._clock.monotonic()
            await self._pause(min(self.retry_period, max(0.0, remaining)))

    async def _attempt(self, *, timeout: float, renewing: bool = False) -> bool:
        """One bounded tryAcquireOrRenew; API errors and timeouts count as a failed try.

        A renew (``renewing``) that got the lock after :meth:`release` gave the Lease up
        tries nothing: the Lease it would find is free, and taking it again would undo the
        release the standby is waiting for."""
        async with self._lock:
            if renewing and not self._leading:
                return False
            try:
                return await self._within(self.try_acquire_or_renew(), timeout)
            except _ATTEMPT_ERRORS as err:
                log.info(
                    MSG_ATTEMPT_FAILED,
                    extra=kv(lease=self._describe(), error=str(err) or type(err).__name__),
                )
                return False

    async def try_acquire_or_renew(self) -> bool:
        """One round of client-go's ``tryAcquireOrRenew``; API errors propagate.

        Unbounded and unlocked: :meth:`acquire` and :meth:`hold` call it under a lock and a
        deadline. Call it directly only where nothing else drives this elector (tests, tools).
        """
        now = micro_time(self._clock.now())
        desired: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        # 1. Fast path: the leader writes over the Lease it last wrote. A Conflict means
        # someone else wrote it since, and the slow path reads what they wrote.
        if self._leading and self._lease is not None and self.leader == self.identity:
            desired["acquireTime"] = self._observed.get("acquireTime", now)
            desired["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0)
            try:
                await self._write(desired)
                return True
            except ApiError as err:
                log.debug("optimistic lease update failed", extra=kv(error=str(err)))

        # 2. Read the Lease, or create it.
        try:
            lease = await self._client.get(LEASES, self.name, self.namespace)
        except NotFound:
            created = await self._client.create(
                LEASES,
                {
                    "apiVersion": LEASES.api_version,
                    "kind": LEASES.kind,
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": desired,
                },
                self.namespace,
            )
            self._observe(created)
            return True
        self._observe(lease)

        # 3. Someone else holds a Lease that hasn't expired on our clock.
        holder = self.leader
        if holder and holder != self.identity and self.lease_valid():
            log.debug("lease is held by another candidate", extra=kv(holder=holder))
            return False

        # 4. Take or renew it.
        if holder == self.identity:
            desired["acquireTime"] = self._observed.get("acquireTime", now)
            desired["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0)
        else:
            desired["leaseTransitions"] = int(self._observed.get("leaseTransitions") or 0) + 1
        await self._write(desired)
        return True

    async def _write(self, record: Mapping[str, Any]) -> None:
        """PUT the record over the Lease last read or written, guarded by its resourceVersion."""
        if self._lease is None:
            raise RuntimeError("no Lease read yet")
        body = dict(self._lease)
        body["spec"] = dict(record)
        updated = await self._client.replace(LEASES, body, self.namespace)
        self._observe(updated)

    def _observe(self, lease: Mapping[str, Any]) -> None:
        """Remember the Lease; restart the expiry clock only when its record changed."""
        self._lease = dict(lease)
        record = lease_record(lease)
        if record != self._observed:
            self._observed = record
            self._observed_at = self._clock.monotonic()
        holder = self.leader
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            log.info(MSG_NEW_LEADER, extra=kv(lease=self._describe(), identity=holder))
            if self._on_new_leader is not None:
                self._on_new_leader(holder)

    async def _pause(self, seconds: float) -> None:
        """Sleep on the clock; wake early when this candidate stops leading."""
        with contextlib.suppress(TimeoutError):
            await self._within(self._not_leading.wait(), seconds)

    async def _within(self, awaitable: Awaitable[T], seconds: float) -> T:
        return await within(self._clock, awaitable, seconds)


__all__ = [
    "DEFAULT_LEASE_NAME",
    "JITTER_FACTOR",
    "LOST_MESSAGE",
    "MASTER_STATUS",
    "MSG_ACQUIRED",
    "MSG_ATTEMPTING",
    "MSG_ATTEMPT_FAILED",
    "MSG_FENCED",
    "MSG_NEW_LEADER",
    "MSG_RELEASED",
    "MSG_RELEASE_FAILED",
    "MSG_RENEW_FAILED",
    "LeaderElectionLost",
    "LeaderElector",
    "LeaseClient",
    "WriteFenced",
    "default_identity",
    "lease_record",
    "micro_time",
]
