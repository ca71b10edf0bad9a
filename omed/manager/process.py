"""The composition root: build every part from the flags and the cluster, then run them.

Why: this is the one place that knows every part, so the parts don't know each other.
:func:`run` performs the start-up checks of :mod:`omed.manager.startup` in their
documented order, builds the parts, and hands them to :class:`omed.manager.lifecycle.Manager`.

API clients, each with its own ``--kube-api-qps`` / ``--kube-api-burst`` limiter, as
client-go gives each of a manager's clients its own (the rate limit caps the requests that
each of the manager's API clients sends):

* the controllers' client: start-up reads, informers, reconciles, the config cache; with
  leader election, each of its writes passes the Lease's fence (:mod:`omed.manager.fencing`);
* the leader election client: a burst of reconciles can never delay a Lease renewal
  behind the controllers' limiter (one request per retry period needs no more);
* the event recorder's client: event writes never take the controllers' budget.

Signals: the first SIGTERM or SIGINT starts the ordered stop (and arms a backstop that exits
1 just after ``--graceful-shutdown-timeout`` if the stop hasn't ended); a second one exits 1
at once, as controller-runtime's signal handler does.

Invariant: every client is closed and every signal handler removed when :func:`run`
returns, whatever the outcome; the exit code is 0 only after an ordered stop.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Final

from omed.clock import Clock, RealClock
from omed.config import ConfigCache, Options
from omed.events import EventRecorder
from omed.informers import InformerFactory
from omed.kube.client import ClusterConfig, KubeClient, load_config
from omed.leaderelection import DEFAULT_LEASE_NAME, LeaderElector, default_identity
from omed.log import kv
from omed.manager.controllers import CONTROLLERS, ControllerContext
from omed.manager.fencing import FencedKubeClient
from omed.manager.http import MetricsServer, ProbeServer
from omed.manager.leader import LeaderWork
from omed.manager.lifecycle import Manager, Server
from omed.manager.startup import (
    MSG_FAILED_TO_START,
    MSG_KUBECONFIG,
    MSG_POD_GROUPS,
    MSG_STATUS_REPRESENTATION,
    StartupFailure,
    detect_pod_group_crd,
    detect_policy_crds,
    load_configmap_startup,
    manager_namespace,
    status_preflight,
    status_representation,
)
from omed.manager.webhookprocess import WebhookProcess
from omed.manager.webhooks import configmap_data
from omed.webhooks.policies import FeatureGates

__all__ = ["MSG_SECOND_SIGNAL", "MSG_SHUTDOWN_OVERRAN", "MSG_SIGNAL", "run"]

log = logging.getLogger("setup")

MSG_SIGNAL: Final = "Received signal, stopping"
MSG_SECOND_SIGNAL: Final = "Received a second signal, exiting at once"
MSG_SHUTDOWN_OVERRAN: Final = (
    "Graceful shutdown timeout passed and the stop hasn't ended; exiting at once"
)
USER_AGENT: Final = "omed"
BACKSTOP_GRACE: Final = 1.0
"""How long after the graceful shutdown timeout the backstop exits, if the stop hasn't."""


def _exit_now(message: str, **fields: object) -> None:
    log.error(message, extra=kv(**fields))
    sys.stderr.flush()
    os._exit(1)


class _Signals:
    """SIGTERM/SIGINT: the first sets ``stop`` and arms the backstop; a second exits 1
    without waiting.

    The backstop is a timer thread, so it fires even if the event loop doesn't run: every
    step of the ordered stop is bounded by the graceful shutdown timeout
    (:mod:`omed.manager.shutdown`), and this catches whatever wasn't, just after it.
    """

    SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        stop: asyncio.Event,
        *,
        backstop_after: Callable[[], float | None] = lambda: None,
    ) -> None:
        self._loop = loop
        self._stop = stop
        self._received = 0
        self._backstop_after = backstop_after
        self._backstop: threading.Timer | None = None
        for sig in self.SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        self._received += 1
        if self._received == 1:
            log.info(MSG_SIGNAL, extra=kv(signal=sig.name))
            self._stop.set()
            self._arm_backstop()
            return
        _exit_now(MSG_SECOND_SIGNAL, signal=sig.name)

    def _arm_backstop(self) -> None:
        timeout = self._backstop_after()
        if timeout is None:
            return
        self._backstop = threading.Timer(
            timeout + BACKSTOP_GRACE,
            _exit_now,
            args=(MSG_SHUTDOWN_OVERRAN,),
            kwargs={"gracefulShutdownTimeout": f"{timeout:g}s"},
        )
        self._backstop.daemon = True
        self._backstop.start()

    def remove(self) -> None:
        if self._backstop is not None:
            self._backstop.cancel()
        for sig in self.SIGNALS:
            self._loop.remove_signal_handler(sig)


async def run(
    options: Options, *, env: Mapping[str, str], stop: asyncio.Event | None = None
) -> int:
    """Check, build and run the manager; return the process exit code.

    ``stop`` is set by SIGTERM/SIGINT (handlers are installed for the duration of the call);
    a caller may also set it.
    """
    stop = stop or asyncio.Event()
    signals = _Signals(
        asyncio.get_running_loop(), stop, backstop_after=lambda: options.graceful_shutdown_timeout
    )
    try:
        return await _run(options, env=env, stop=stop)
    except StartupFailure as failure:
        log.error(failure.message, extra=kv(error=failure.error))
        return failure.exit_code
    except Exception as err:  # a bug: still one documented line and exit 1, with the trace
        log.error(MSG_FAILED_TO_START, exc_info=err)
        return 1
    finally:
        signals.remove()


async def _run(options: Options, *, env: Mapping[str, str], stop: asyncio.Event) -> int:
    namespace = manager_namespace(env)
    log.info(
        "Starting manager",
        extra=kv(namespace=namespace, flags=sorted(options.set_flags), pid=os.getpid()),
    )
    try:
        if options.kubeconfig:
            os.stat(options.kubeconfig)  # a clear error for a missing file
        cluster = await load_config(options.kubeconfig)
    except Exception as err:
        raise StartupFailure(MSG_KUBECONFIG, str(err) or type(err).__name__) from err
    clock = RealClock()
    clients: list[KubeClient] = []

    def client(user_agent: str, *, fence: Callable[[], None] | None = None) -> KubeClient:
        made = _client(options, cluster, clock=clock, user_agent=user_agent, fence=fence)
        clients.append(made)
        return made

    try:
        election: LeaderElector | None = None
        if options.leader_elect:
            election = LeaderElector(
                client(f"{USER_AGENT}-leader-election"),
                namespace=options.leader_election_namespace,
                name=DEFAULT_LEASE_NAME,
                identity=default_identity(),
                lease_duration=options.leader_elect_lease_duration,
                renew_deadline=options.leader_elect_renew_deadline,
                retry_period=options.leader_elect_retry_period,
                clock=clock,
            )
        # With election, every write of the controllers' client passes the Lease's fence
        # right before it is sent (omed/manager/fencing.py).
        api = client(USER_AGENT, fence=None if election is None else election.check_fence)
        startup = await load_configmap_startup(api, namespace=namespace)
        log.info(MSG_STATUS_REPRESENTATION, extra=kv(**status_representation(startup)))
        await status_preflight(api)
        found, errors = await detect_policy_crds(api)
        for error in errors:
            log.info("Policy CRD lookup failed; the feature stays off", extra=kv(error=error))
        gates = FeatureGates(**found)
        pod_groups, why = await detect_pod_group_crd(api)
        log.info(MSG_POD_GROUPS, extra=kv(podGroups=pod_groups, reason=why))

        config = ConfigCache(
            fetch=lambda: configmap_data(api, namespace),
            ttl=options.config_cache_ttl,
            clock=clock,
        )
        informers = InformerFactory(api, clock=clock)
        recorder = EventRecorder(
            client(f"{USER_AGENT}-events"),
            burst=startup.event_recorder.burst_size,
            refill_interval=startup.event_recorder.refill_interval,
            clock=clock,
        )
        context = ControllerContext(
            client=api,
            informers=informers,
            events=recorder,
            config=config,
            startup=startup,
            options=options,
            clock=clock,
            namespace=namespace,
            pod_groups=pod_groups,
        )
        controllers = [(factory.name, factory.build(context)) for factory in CONTROLLERS]
        work = LeaderWork(controllers=controllers, informers=informers, recorder=recorder)

        if election is not None:
            log.info(
                "Leader election enabled",
                extra=kv(
                    lease=f"{options.leader_election_namespace}/{DEFAULT_LEASE_NAME}",
                    identity=election.identity,
                ),
            )

        probes = ProbeServer(address=options.health_probe_addr, ready_checks={})
        servers: list[Server] = [
            s for s in (probes, MetricsServer(address=options.metrics_bind_address)) if s.enabled
        ]
        if options.webhook:
            # In a process of its own, so the leader's reconciles never delay an admission
            # (omed/manager/webhookprocess.py).
            webhook = WebhookProcess(options=options, namespace=namespace, gates=gates)
            probes.ready_checks["webhook"] = lambda: (
                None if webhook.ready else "the webhook server is not serving"
            )
            servers.append(webhook)
        manager = Manager(
            servers=servers,
            work=work,
            election=election,
            graceful_shutdown_timeout=options.graceful_shutdown_timeout,
            clock=clock,
        )
        probes.ready_checks["leader"] = manager.leader_ready
        # Everything made so far (modules, classes, the models' validators: ~57,000 objects)
        # lives as long as the process: keep it out of the collector's full collections,
        # which would otherwise pause the event loop, and the webhooks, for tens of ms.
        gc.collect()
        gc.freeze()
        return await manager.run(stop)
    finally:
        for made in clients:
            await made.close()


def _client(
    options: Options,
    cluster: ClusterConfig,
    *,
    clock: Clock,
    user_agent: str,
    fence: Callable[[], None] | None = None,
) -> KubeClient:
    if fence is not None:
        return FencedKubeClient(
            cluster,
            fence=fence,
            qps=options.kube_api_qps,
            burst=options.kube_api_burst,
            clock=clock,
            user_agent=user_agent,
        )
    return KubeClient(
        cluster,
        qps=options.kube_api_qps,
        burst=options.kube_api_burst,
        clock=clock,
        user_agent=user_agent,
    )
