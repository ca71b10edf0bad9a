"""The launcher starts a real control plane, the generated CRDs work on it, and nothing is
left behind when it stops, even when its owner is killed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from omed.kube.errors import Invalid
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES
from omed_devcluster.binaries import KUBERNETES_VERSIONS
from omed_devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration


CHILDREN = ("etcd", "apiserver", "controller-manager", "scheduler")


def test_every_component_is_healthy_and_acts(control_plane: Any) -> None:
    """All four components answered healthy at start, and the controller manager acts: its
    ServiceAccount controller made kube-system's default ServiceAccount and its root-CA
    publisher the default namespace's kube-root-ca.crt. (The scheduler's binding is shown by
    the simulator's and the e2e tests.)"""
    assert set(control_plane.healthy_after) == {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    }
    deadline = time.monotonic() + 30
    while True:
        try:
            control_plane.get_json("/api/v1/namespaces/kube-system/serviceaccounts/default")
            control_plane.get_json("/api/v1/namespaces/default/configmaps/kube-root-ca.crt")
            break
        except OSError:
            assert time.monotonic() < deadline, "the controller manager never acted"
            time.sleep(0.2)


def test_version_is_the_pinned_release(control_plane: Any) -> None:
    version = control_plane.get_json("/version")
    assert version["gitVersion"] in KUBERNETES_VERSIONS or (
        control_plane.binaries.kubernetes_version == "external"
    )
    assert version["gitVersion"] != "v0.0.0-master+$Format:%H$"


def _isvc(name: str, min_replicas: Any = 1) -> dict[str, Any]:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {
            "deploymentMode": "OMENative",
            "model": {"name": "llama"},
            "runtime": {"name": "srt"},
            "engine": {"minReplicas": min_replicas, "maxReplicas": 4},
        },
    }


async def test_crds_store_objects_and_status(
    kube: Any, namespace: str, crds_installed: None
) -> None:
    created = await kube.create(INFERENCE_SERVICES, _isvc("chat"), namespace)
    assert created["spec"]["engine"]["minReplicas"] == 1
    created["status"] = {
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Pending",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    stored = await kube.replace_status(INFERENCE_SERVICES, created, namespace)
    assert stored["status"]["conditions"][0]["type"] == "Ready"

    irep = {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": {"name": "chat-engine", "labels": {"ome.io/inferenceservice": "chat"}},
        "spec": {
            "parentRef": {"name": "chat"},
            "component": "engine",
            "replicas": 2,
            "runners": [
                {
                    "name": "default",
                    "size": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "ome-container", "image": "ome/serving:1"}]
                        }
                    },
                }
            ],
        },
    }
    made = await kube.create(INFERENCE_REPLICAS, irep, namespace)
    made["status"] = {
        "observedGeneration": 1,
        "replicas": 2,
        "labelSelector": "ome.io/inferenceservice=chat,component=engine",
        "instanceStatuses": [
            {
                "index": 0,
                "incarnation": 1,
                "phase": "Ready",
                "podCount": 1,
                "servingPodCount": 1,
                "availablePodCount": 1,
                "admitted": True,
            },
            {
                "index": 1,
                "incarnation": 1,
                "phase": "Creating",
                "podCount": 1,
                "servingPodCount": 0,
                "availablePodCount": 0,
                "admitted": True,
            },
        ],
    }
    with_status = await kube.replace_status(INFERENCE_REPLICAS, made, namespace)
    assert [r["index"] for r in with_status["status"]["instanceStatuses"]] == [0, 1]
    # The scale subresource reads spec.replicas and status.replicas.
    scale = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
    assert scale["spec"]["replicas"] == 2
    scale_sub = await kube.request(
        "GET", INFERENCE_REPLICAS.path(namespace, "chat-engine", "scale")
    )
    assert scale_sub["kind"] == "Scale" and scale_sub["status"]["replicas"] == 2


async def test_schema_rejects_bad_objects(kube: Any, namespace: str, crds_installed: None) -> None:
    with pytest.raises(Invalid) as caught:
        await kube.create(INFERENCE_SERVICES, _isvc("bad", min_replicas="abc"), namespace)
    assert "minReplicas" in caught.value.message


def _pids_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        # a zombie is gone for our purposes: read its state
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_stop_leaves_no_process_or_directory(control_plane: Any) -> None:
    plane = ControlPlane(control_plane.binaries).start()
    directory = plane.dir
    assert directory is not None
    pids = [int((directory / f"{c}.pid").read_text()) for c in CHILDREN]
    assert len(_pids_alive(pids)) == 4
    plane.stop()
    assert _pids_alive(pids) == []
    assert not directory.exists()


def test_killed_owner_leaves_nothing_behind(control_plane: Any, tmp_path: Path) -> None:
    """kill -9 of the process that started a control plane takes etcd, the apiserver, the
    controller manager and the scheduler with it; the next start sweeps its directory."""
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from omed_devcluster.binaries import ensure_binaries
        from omed_devcluster.controlplane import ControlPlane
        plane = ControlPlane(ensure_binaries(), base_dir=Path({str(tmp_path)!r})).start()
        print(plane.dir, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    directory = Path(proc.stdout.readline().strip())
    pids = [int((directory / f"{c}.pid").read_text()) for c in CHILDREN]
    assert len(_pids_alive(pids)) == 4
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15
    while _pids_alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _pids_alive(pids) == []
    from omed_devcluster.controlplane import sweep_stale

    assert sweep_stale(tmp_path) == 1
    assert not directory.exists()
