"""``python -m omed_devcluster.simulator``: simulated GPU nodes until SIGINT or SIGTERM.

For the demo and for benchmarks run as separate processes: it loads a kubeconfig, starts a
:class:`~omed_devcluster.simulator.NodeSimulator` and stops it (deleting its nodes unless
``--keep-nodes``) on a signal, logging its write counts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Sequence

from omed.kube.client import KubeClient, load_config
from omed.log import kv
from omed_devcluster.sim.kubelet import Timings

log = logging.getLogger("omed_devcluster.simulator")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m omed_devcluster.simulator",
        description="Simulated GPU nodes (their kubelets; kube-scheduler places the pods) "
        "for a dev control plane; runs until SIGINT or SIGTERM.",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig path (default: $KUBECONFIG)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--cpu-per-node", default="192")
    parser.add_argument("--memory-per-node", default="2Ti")
    parser.add_argument("--pods-per-node", type=int, default=110)
    parser.add_argument("--node-prefix", default="sim-node")
    parser.add_argument(
        "--namespace", action="append", dest="namespaces", help="repeatable; default: all"
    )
    parser.add_argument("--pod-selector", help="only pods matching this label selector")
    parser.add_argument("--timings", choices=("fast", "realistic"), default="fast")
    parser.add_argument("--keep-nodes", action="store_true", help="leave the nodes on exit")
    parser.add_argument("--qps", type=float, default=500.0)
    parser.add_argument("--log-format", choices=("console", "json"), default="console")
    return parser


async def _run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    config = await load_config(args.kubeconfig, context=args.context)
    timings = Timings.realistic() if args.timings == "realistic" else Timings()
    from omed_devcluster.simulator import NodeSimulator

    client = KubeClient(config, qps=args.qps, burst=int(args.qps * 2), user_agent="omed-simulator")
    simulator = NodeSimulator(
        client,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        cpu_per_node=args.cpu_per_node,
        memory_per_node=args.memory_per_node,
        pods_per_node=args.pods_per_node,
        node_prefix=args.node_prefix,
        namespaces=args.namespaces,
        pod_selector=args.pod_selector,
        timings=timings,
        delete_nodes_on_stop=not args.keep_nodes,
    )
    async with client, simulator:
        await stop.wait()
        log.info("Node simulator stopping", extra=kv(stats=vars(simulator.stats)))


def main(argv: Sequence[str] | None = None) -> int:
    from omed import log as omed_log

    args = _parser().parse_args(argv)
    omed_log.setup(encoder=args.log_format)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(args))
    return 0
