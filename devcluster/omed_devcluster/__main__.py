"""``python -m omed_devcluster``: prepare binaries, or run a local cluster until Ctrl-C.

- ``prepare``: find or build kube-apiserver, kubectl, etcd and helm into the cache, showing
  progress; prints their paths as JSON. CI and the demo call it first.
- ``up``: start etcd + kube-apiserver, the omed CRDs and the node simulator with GPU nodes;
  print how to use kubectl against it; keep running until Ctrl-C, then clean up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from omed_devcluster.binaries import BinaryError, ensure_binaries
from omed_devcluster.controlplane import ControlPlane, ControlPlaneError

ROOT = Path(__file__).resolve().parent.parent.parent


def _prepare() -> int:
    try:
        binaries = ensure_binaries()
    except BinaryError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(binaries.as_dict(), indent=2))
    return 0


class _Stop(Exception):
    """SIGINT or SIGTERM while the cluster starts (outside the event loop)."""


async def _serve_cluster(
    plane: ControlPlane, *, nodes: int, gpus: int, received: list[int]
) -> None:
    from omed.kube.client import KubeClient, load_config
    from omed_devcluster.setup import install_crds
    from omed_devcluster.simulator import NodeSimulator, Timings

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    async with KubeClient(
        await load_config(str(plane.kubeconfig_path)), qps=500, burst=1000
    ) as client:
        await install_crds(client, ROOT / "deploy" / "crds")
        async with NodeSimulator(
            client, nodes=nodes, gpus_per_node=gpus, timings=Timings.realistic()
        ):
            print(
                f"\nA local control plane is running (Kubernetes "
                f"{plane.binaries.kubernetes_version}), with {nodes} simulated GPU nodes."
            )
            print("Use it from another shell:\n")
            print(f"  export KUBECONFIG={plane.kubeconfig_path}")
            print(f"  {plane.binaries.kubectl} get nodes")
            print("\nPress Ctrl-C to stop and clean up.", flush=True)
            await stop.wait()


def _up(nodes: int, gpus: int) -> int:
    """Run the cluster until SIGINT or SIGTERM, at any stage (building the binaries, starting
    etcd and kube-apiserver, running); then stop everything it started. Exits 128 + the
    signal's number (130 for Ctrl-C, 143 for SIGTERM), as the demo does, or 1 on an
    error."""
    received: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        received.append(signum)
        raise _Stop

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)
    plane: ControlPlane | None = None
    code = 0
    try:
        binaries = ensure_binaries()
        plane = ControlPlane(binaries)
        print("starting the control plane ...", file=sys.stderr, flush=True)
        plane.start()
        asyncio.run(_serve_cluster(plane, nodes=nodes, gpus=gpus, received=received))
    except (BinaryError, ControlPlaneError) as err:
        print(f"error: {err}", file=sys.stderr)
        code = 1
    except _Stop:
        pass
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # nothing cuts the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        if received:
            print(f"{signal.Signals(received[0]).name} received: stopping", file=sys.stderr)
        if plane is not None:
            plane.stop()
        print("stopped; nothing left behind", file=sys.stderr)
    return 128 + received[0] if received and code == 0 else code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m omed_devcluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="find or build the control plane binaries")
    up = sub.add_parser("up", help="run a local control plane with simulated GPU nodes")
    up.add_argument("--nodes", type=int, default=4)
    up.add_argument("--gpus-per-node", type=int, default=8)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        return _prepare()
    return _up(args.nodes, args.gpus_per_node)


if __name__ == "__main__":
    sys.exit(main())
