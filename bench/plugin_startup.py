"""How long ``kubectl ome`` takes to start, and what ``instance list`` spends on imports
against its API reads; print JSON (medians of ``--runs`` runs).

    .venv/bin/python bench/plugin_startup.py [--runs 15] [--cluster] [--baseline GIT-REV]

Every process runs this checkout's omed (``PYTHONPATH``), whichever one the virtualenv's
editable install points at, with ``PYTHONDONTWRITEBYTECODE`` removed from its environment: an
installed plugin runs from the ``.pyc`` files its install compiled, and a child that may not
write them compiles every module of the checkout from source on every run, which would put
the compiler's time (tens of ms of CPU for omed's modules) into each figure. The first run of
each command writes them; the runs timed after it load them.

* ``help``: ``kubectl-ome --help`` (the virtualenv's console script) as a process: wall time
  and CPU time (user + system of the child); ``help_modules``, how many modules the process
  holds when the command is done (``sys.modules``, the interpreter's own start included).
  ``python_floor`` is ``python -c pass`` of the same interpreter, what any Python command
  costs before its first import.
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
  times ``kubectl-ome instance list`` as a process (``list_process``, wall and CPU), counts
  its modules as ``help_modules`` does (``list_modules``) and sums their own
  ``-X importtime`` by package (``list_run_imports_ms``, the run of median total;
  ``list_run_imports_min_ms``, each module's least own time over the runs, summed by
  package: a run's total swings with the load by more than omed's share, a module's least
  time much less), and, in
  this process with every import done, what the command does on the wire: load the
  kubeconfig, open a client (a new connection, as each run opens one), GET the
  InferenceService and LIST the InferenceReplicas (``list_reads_ms``).
* ``--baseline GIT-REV``: the same process figures for another revision, checked out with
  ``git worktree add --detach`` in a temporary directory (removed after) and run
  interleaved with this checkout's, run for run, so both see the same load; under
  ``baseline``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from collections.abc import Iterator
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


def _base_env() -> dict[str, str]:
    """This process's environment, less ``PYTHONDONTWRITEBYTECODE`` (the module's docstring
    says why a child must be free to write its ``.pyc`` files)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _env(tree: Path) -> dict[str, str]:
    """The environment of a process that runs ``tree``'s omed."""
    return {**_base_env(), "PYTHONPATH": str(tree)}


def _cwd(env: dict[str, str] | None) -> str | None:
    """Where a process of ``env`` runs: its tree, since ``python -c`` imports from its
    working directory first."""
    return None if env is None else env["PYTHONPATH"]


def _process(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(
        argv,
        check=True,
        stdout=subprocess.DEVNULL,
        env=_base_env() if env is None else env,
        cwd=_cwd(env),
    )
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


def _importtime(argv: list[str], env: dict[str, str]) -> str:
    """The ``-X importtime`` report of one run of ``argv`` (``python`` and its arguments)."""
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=_cwd(env),
    )
    return done.stderr


def _imports(env: dict[str, str], report: str | None = None) -> dict[str, float]:
    """One fresh interpreter's import time of ``LIST_IMPORTS`` (or of the ``-X importtime``
    ``report`` given), in ms, by package."""
    if report is None:
        report = _importtime([sys.executable, "-c", LIST_IMPORTS], env)
    parts: dict[str, float] = {"kubernetes_asyncio": 0, "aiohttp": 0, "omed": 0, "other": 0}
    for line in report.splitlines():
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
        for line in report.splitlines()
        if (match := _LINE.match(line))
        and match.group(3).startswith(
            ("kubernetes_asyncio.client.api.", "kubernetes_asyncio.client.models.")
        )
    )
    return rounded


RUN_PLUGIN = "import sys; from omed.cli.kubectl_ome import main; sys.exit(main())"
"""The plugin's console script, as ``python -c`` (for ``-X importtime``)."""
COUNT_PLUGIN = (
    "import sys; from omed.cli.kubectl_ome import main; code = main(); "
    "print(f'modules {len(sys.modules)}', file=sys.stderr); sys.exit(code)"
)
"""The same, printing how many modules the process holds when the command is done
(``-X importtime`` has no line for a module imported by ``importlib.import_module``)."""


def _module_count(args: list[str], env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", COUNT_PLUGIN, *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=_cwd(env),
    )
    return int(done.stderr.rsplit("modules ", 1)[1])


def _least(reports: list[str]) -> dict[str, float]:
    """Each module's least own time over the ``-X importtime`` ``reports``, in ms, summed by
    package as :func:`_imports` sums one report."""
    least: dict[str, int] = {}
    for report in reports:
        for line in report.splitlines():
            if (match := _LINE.match(line)) is not None:
                name, own = match.group(3), int(match.group(1))
                least[name] = min(own, least.get(name, own))
    parts: dict[str, float] = {"kubernetes_asyncio": 0, "aiohttp": 0, "omed": 0, "other": 0}
    for name, own in least.items():
        top = name.split(".")[0]
        parts[top if top in parts else "other"] += own / 1000
    parts["total"] = sum(parts.values())
    return {key: round(value, 1) for key, value in parts.items()}


def _typical(imports: list[dict[str, float]]) -> dict[str, Any]:
    median_total = statistics.median(i["total"] for i in imports)
    typical = min(imports, key=lambda i: abs(i["total"] - median_total))
    return {"median_total": round(median_total, 1), "typical_run": typical}


def _processes(
    trees: dict[str, Path], runs: int, argv: list[str]
) -> dict[str, list[tuple[float, float]]]:
    """``runs`` runs of ``argv`` for each tree, interleaved."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            samples[name].append(_process(argv, _env(tree)))
    return samples


async def _cluster(runs: int, trees: dict[str, Path]) -> dict[str, dict[str, Any]]:
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
        words = ["instance", "list", name, "-n", namespace, "--kubeconfig", kubeconfig]
        argv = [str(PLUGIN), *words]
        for tree in trees.values():
            _process(argv, _env(tree))  # compile the .pyc files once
        processes = _processes(trees, runs, argv)
        reports: dict[str, list[str]] = {tree_name: [] for tree_name in trees}
        for _ in range(runs):  # interleaved, as the processes are
            for tree_name, tree in trees.items():
                reports[tree_name].append(
                    _importtime([sys.executable, "-c", RUN_PLUGIN, *words], _env(tree))
                )
        figures: dict[str, dict[str, Any]] = {}
        for tree_name, tree in trees.items():
            runs_of_tree = reports[tree_name]
            figures[tree_name] = {
                "list_process": _medians(processes[tree_name]),
                "list_modules": _module_count(words, _env(tree)),
                "list_run_imports_ms": _typical([_imports(_env(tree), r) for r in runs_of_tree]),
                "list_run_imports_min_ms": _least(runs_of_tree),
            }
        reads = []
        for _ in range(runs):
            began = time.perf_counter()
            loaded = await load_config(kubeconfig)
            async with KubeClient(loaded, user_agent="kubectl-ome") as client:
                await read_collection(client, namespace, name)
            reads.append(time.perf_counter() - began)
        figures["current"]["list_reads_ms"] = round(statistics.median(reads) * 1000, 1)
        return figures
    finally:
        plane.stop()


def _figures(trees: dict[str, Path], runs: int) -> dict[str, dict[str, Any]]:
    help_argv = [str(PLUGIN), "--help"]
    import_argv = [sys.executable, "-c", LIST_IMPORTS]
    ordinary_argv = [sys.executable, "-c", ORDINARY_IMPORTS]
    for tree in trees.values():
        for argv in (help_argv, import_argv, ordinary_argv):
            _process(argv, _env(tree))  # compile the .pyc files once
    help_runs = _processes(trees, runs, help_argv)
    import_runs = _processes(trees, runs, import_argv)
    ordinary_runs = _processes(trees, runs, ordinary_argv)
    figures: dict[str, dict[str, Any]] = {}
    for name, tree in trees.items():
        env = _env(tree)
        figures[name] = {
            "help": _medians(help_runs[name]),
            "help_modules": _module_count(["--help"], env),
            "list_imports_ms": _typical([_imports(env) for _ in range(runs)]),
            "list_imports_process": _medians(import_runs[name]),
            "ordinary_loader_imports_process": _medians(ordinary_runs[name]),
        }
    return figures


@contextlib.contextmanager
def _checkout(rev: str | None) -> Iterator[Path | None]:
    """A detached worktree of ``rev`` in a temporary directory, removed after."""
    if rev is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="omed-baseline-") as parent:
        tree = Path(parent) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), rev],
            check=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cluster", action="store_true", help="also time instance list live")
    parser.add_argument("--baseline", metavar="GIT-REV", help="also measure this revision")
    args = parser.parse_args()
    with _checkout(args.baseline) as baseline:
        trees = {"current": ROOT}
        if baseline is not None:
            trees["baseline"] = baseline
        floor = [_process([sys.executable, "-c", "pass"]) for _ in range(args.runs)]
        figures = _figures(trees, args.runs)
        if args.cluster:
            for name, live in asyncio.run(_cluster(args.runs, trees)).items():
                figures[name].update(live)
    report: dict[str, Any] = {
        "runs": args.runs,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "python_floor": _medians(floor),
        **figures["current"],
    }
    if "baseline" in figures:
        report["baseline"] = {"rev": args.baseline, **figures["baseline"]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
