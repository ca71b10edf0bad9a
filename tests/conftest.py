"""Shared fixtures: one real control plane per test session, one namespace per test.

``./dev test`` runs the suite on pytest-xdist workers (one per core, at most four): each
worker is a session of its own, with its own control plane, chart install and ports, so tests
on different workers share nothing but the machine.

The control plane is real etcd, kube-apiserver, kube-controller-manager and kube-scheduler
started by :mod:`omed_devcluster`. Binaries
are found or built on first use (see docs/testing.md); there is no skip path: a test that
needs the control plane fails when it cannot start, in CI and locally alike.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


_APISERVERS: list[str] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under pytest-xdist each worker starts a control plane of its own; the controller
    # prints them all, so a worker hands its line back through the output xdist carries.
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["omed_apiservers"] = list(_APISERVERS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    _APISERVERS.extend(getattr(node, "workeroutput", {}).get("omed_apiservers", []))


_FILE_SECONDS: dict[str, float] = {}
"""Seconds of setup, call and teardown per test file, in the process that prints the summary
(under pytest-xdist the controller, which sees every worker's reports)."""
_SLOWEST_FILES = 15


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _APISERVERS:
        terminalreporter.write_line(line)
    # Whole files go to one worker (--dist loadfile): the suite's wall time is set by how
    # these add up per worker, so they are what to split or speed up first.
    slowest = sorted(_FILE_SECONDS.items(), key=lambda item: item[1], reverse=True)
    if slowest and slowest[0][1] >= 1.0:
        terminalreporter.write_sep("-", f"slowest {_SLOWEST_FILES} test files (seconds)")
        for path, seconds in slowest[:_SLOWEST_FILES]:
            terminalreporter.write_line(f"{seconds:8.1f}  {path}")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[object]:
    from omed_devcluster.binaries import ensure_binaries
    from omed_devcluster.controlplane import ControlPlane

    plane = ControlPlane(ensure_binaries())
    plane.start()
    try:
        version = plane.get_json("/version")
        line = (
            f"[control plane] kube-apiserver {version.get('gitVersion')} "
            f"({version.get('platform')}) at {plane.url}, started in {plane.started_in:.1f}s"
        )
        # The test log must show which apiserver the integration tests ran against, even
        # with output capture on: the terminal summary prints it.
        _APISERVERS.append(line)
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kubeconfig(control_plane: object) -> str:
    path = control_plane.kubeconfig_path  # type: ignore[attr-defined]
    return str(path)


@pytest.fixture
async def kube(kubeconfig: str) -> AsyncIterator[object]:
    from omed.kube.client import KubeClient, load_config

    client = KubeClient(await load_config(kubeconfig), qps=1000, burst=2000)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session")
def crds_installed(control_plane: object, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The ome-crd chart, installed with the real helm as an operator installs it."""
    from omed_devcluster.install import OmeInstall

    OmeInstall(control_plane, workdir=tmp_path_factory.mktemp("ome-crd")).install_crds()


@pytest.fixture
async def namespace(kube: object) -> AsyncIterator[str]:
    from omed.kube.resources import NAMESPACES

    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name}})  # type: ignore[attr-defined]
    yield name
    await _release_inference_replicas(kube, name)
    await kube.delete(NAMESPACES, name)  # type: ignore[attr-defined]


async def _release_inference_replicas(kube: Any, namespace: str) -> None:
    """Delete the namespace's InferenceReplicas and drop their cleanup finalizer.

    The test's manager may already be stopped: an InferenceReplica would then hold its
    ``ome.io/inferencereplica-cleanup`` finalizer, and its namespace would stay Terminating for
    the rest of the session, where every later manager on this control plane would list it
    and tear it down first. Deleting before unpatching keeps a manager that still runs from
    adding the finalizer back (no finalizer can be added to an object being deleted); the pods
    go with their owners through the garbage collector.
    """
    from omed.kube.errors import NotFound
    from omed.kube.resources import INFERENCE_REPLICAS

    try:
        listed = await kube.list_all(INFERENCE_REPLICAS, namespace)
    except NotFound:  # no CRDs on this control plane
        return
    for irep in listed:
        name = irep["metadata"]["name"]
        with contextlib.suppress(NotFound):
            await kube.delete(INFERENCE_REPLICAS, name, namespace)
            released = {"metadata": {"finalizers": None}}
            await kube.patch(INFERENCE_REPLICAS, name, released, namespace)
