"""How long ``kubectl ome`` takes to start, and what ``instance list`` spends on imports
against its API reads; print JSON (medians of ``--runs`` runs).

    .venv/bin/python bench/plugin_startup.py [--runs 15] [--cluster]

* ``help``: ``kubectl-ome --help`` (the virtualenv's console script) as a process: wall time
  and CPU time (user + system of the child). ``python_floor`` is ``python -c pass`` of the
  same interpreter, what any Python command costs before its first import.
* ``list_imports``: a fresh interpreter's ``-X importtime`` of everything ``instance list``
  imports (the plugin, the command's module, the client and the kubeconfig loaders it
  imports when it loads the kubeconfig, asyncio), each module's own time summed by package:
  ``kubernetes_asyncio`` (its loaders, without the generated client:
  omed.kube.kubeconfig_loaders), ``aiohttp``, ``omed`` and the rest; ``generated_modules``,
  how many of the generated client's modules (APIs and models) that imports (0); and
  ``list_imports_process``, the CPU and wall time of a ``python -c`` that imports them
  (``python_floor`` included), which a loaded machine distorts less than ``-X importtime``'s
  wall clock; ``ordinary_loader_imports_process``, the same with kubernetes-asyncio's
  loaders imported the ordinary way, the generated client with them (what the deferral
  saves).
* ``--cluster``: starts the dev control plane with the CRDs and an InferenceService, then
  times ``kubectl-ome instance list`` as a process (wall), and, in this process with every
  import done, what the command does on the wire: load the kubeconfig, open a client (a new
  connection, as each run opens one), GET the InferenceService and LIST the
  InferenceReplicas (``list_reads``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-ome"
ROOT = Path(__file__).resolve().parents[1]
LIST_IMPORTS = (
    "import omed.cli.kubectl_ome, omed.cli.kubectl_ome_instance, asyncio, "
    "omed.kube.client, omed.kube.kubeconfig_loaders"
)
ORDINARY_IMPORTS = "import kubernetes_asyncio.config.kube_config; " + LIST_IMPORTS
"""The same, with the library's loaders imported the ordinary way first (the whole generated
client comes with them, and omed.kube.kubeconfig_loaders then has nothing to defer)."""
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| *(\S+)")


def _process(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _medians(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "wall_ms": round(statistics.median(s[0] for s in samples) * 1000, 1),
        "cpu_ms": round(statistics.median(s[1] for s in samples) * 1000, 1),
        "min_wall_ms": round(min(s[0] for s in samples) * 1000, 1),
    }


def _imports() -> dict[str, float]:
    """One fresh interpreter's import time of ``LIST_IMPORTS``, in ms, by package."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", LIST_IMPORTS],
        check=True,
        capture_output=True,
        text=True,
    )
    parts: dict[str, float] = {"kubernetes_asyncio": 0, "aiohttp": 0, "omed": 0, "other": 0}
    for line in done.stderr.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        name = match.group(3).split(".")[0]
        key = name if name in parts else "other"
        parts[key] += int(match.group(1)) / 1000  # each module's own time, so the parts add up
    parts["total"] = sum(parts.values())
    rounded = {key: round(value, 1) for key, value in parts.items()}
    rounded["generated_modules"] = sum(
        1
        for line in done.stderr.splitlines()
        if (match := _LINE.match(line))
        and match.group(3).startswith(
            ("kubernetes_asyncio.client.api.", "kubernetes_asyncio.client.models.")
        )
    )
    return rounded


async def _cluster(runs: int) -> dict[str, Any]:
    import yaml

    from omed.cli.kubectl_ome_instance import read_collection
    from omed.kube.client import KubeClient, load_config
    from omed.kube.resources import INFERENCE_SERVICES, NAMESPACES
    from omed_devcluster.binaries import ensure_binaries
    from omed_devcluster.controlplane import ControlPlane
    from omed_devcluster.setup import install_crds

    plane = ControlPlane(ensure_binaries())
    plane.start()
    try:
        kubeconfig = str(plane.kubeconfig_path)
        config = await load_config(kubeconfig)
        service = yaml.safe_load((ROOT / "examples" / "inferenceservice.yaml").read_text())
        namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
        async with KubeClient(config) as client:
            await install_crds(client, ROOT / "deploy" / "crds")
            await client.create(NAMESPACES, {"metadata": {"name": namespace}})
            await client.create(INFERENCE_SERVICES, service, namespace)
        argv = [str(PLUGIN), "instance", "list", name, "-n", namespace, "--kubeconfig", kubeconfig]
        processes = [_process(argv) for _ in range(runs)]
        reads = []
        for _ in range(runs):
            began = time.perf_counter()
            loaded = await load_config(kubeconfig)
            async with KubeClient(loaded, user_agent="kubectl-ome") as client:
                await read_collection(client, namespace, name)
            reads.append(time.perf_counter() - began)
        return {
            "list_process": _medians(processes),
            "list_reads_ms": round(statistics.median(reads) * 1000, 1),
        }
    finally:
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cluster", action="store_true", help="also time instance list live")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory():
        _process([str(PLUGIN), "--help"])  # compile the .pyc files once
        floor = [_process([sys.executable, "-c", "pass"]) for _ in range(args.runs)]
        help_runs = [_process([str(PLUGIN), "--help"]) for _ in range(args.runs)]
        imports = [_imports() for _ in range(args.runs)]
        import_runs, ordinary_runs = [], []
        for _ in range(args.runs):  # interleaved, so both see the same load
            import_runs.append(_process([sys.executable, "-c", LIST_IMPORTS]))
            ordinary_runs.append(_process([sys.executable, "-c", ORDINARY_IMPORTS]))
    median_total = statistics.median(i["total"] for i in imports)
    typical = min(imports, key=lambda i: abs(i["total"] - median_total))
    report: dict[str, Any] = {
        "runs": args.runs,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "help": _medians(help_runs),
        "python_floor": _medians(floor),
        "list_imports_ms": {"median_total": round(median_total, 1), "typical_run": typical},
        "list_imports_process": _medians(import_runs),
        "ordinary_loader_imports_process": _medians(ordinary_runs),
    }
    if args.cluster:
        report.update(asyncio.run(_cluster(args.runs)))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
