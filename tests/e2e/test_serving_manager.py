"""The Services and PodDisruptionBudget of a component, with the manager as a real process.

The manager runs as the chart deploys it (its ServiceAccount, RBAC, arguments and ConfigMap,
whose ``podDisruptionBudget`` entry is the chart's default ``maxUnavailable: 1``), against
the real control plane: kube-controller-manager's EndpointSlice controller makes the
EndpointSlices, its disruption controller keeps the budget's status, and the API server's
Eviction API enforces it. The node simulator runs the pods and gives them IPs.

One InferenceService, an engine of three single-pod Instances, is followed through its life:
its Services appear; ``kubectl get endpointslices -l kubernetes.io/service-name=chat-engine``
lists the engine pods' IPs once they are Ready; the budget says ``minAvailable: 2``; one
eviction is granted and the next refused with 429; a user's label on the Service survives a
port change in the runtime, which moves the Service's port and, once the rollout is done,
leaves the per-revision Services of the new revision only; deleting the InferenceService
removes them all (the garbage collector, through the owner references).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from typing import Any

import _support as support
import pytest
from _support import eventually, pod_ready

from omed.api.constants import LABEL_COMPONENT, LABEL_INFERENCE_SERVICE, LABEL_REVISION_HASH
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound, TooManyRequests
from omed.kube.resources import (
    INFERENCE_SERVICES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    SERVICES,
    SERVING_RUNTIMES,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICE = "chat"
ENGINE = f"{SERVICE}-engine"
IDENTITY = f"{LABEL_INFERENCE_SERVICE}={SERVICE}"
TIMEOUT = 120.0


def runtime(port: int) -> dict[str, Any]:
    return support.serving_runtime(
        "srt-svc",
        engineConfig={
            "runner": {
                "name": "ome-container",
                "image": "ome/srt:1.0",
                "ports": [{"name": "http", "containerPort": port}],
            }
        },
    )


class NoWatcher:
    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def kubectl_json(plane: Any, *args: str) -> Any:
    """``kubectl ... -o json`` as an admin, parsed."""
    result = subprocess.run(
        [str(plane.binaries.kubectl), "--kubeconfig", str(plane.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(result.stdout)


async def engine_pods(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    pods = await kube.list_all(
        PODS, namespace, labelSelector=f"{IDENTITY},{LABEL_COMPONENT}=engine"
    )
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def services(kube: KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    listed = await kube.list_all(SERVICES, namespace, labelSelector=IDENTITY)
    return {s["metadata"]["name"]: s for s in listed}


def hashes(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["labels"][LABEL_REVISION_HASH] for p in pods}


def engine_services(digest: str) -> set[str]:
    return {
        ENGINE,
        f"{ENGINE}-headless",
        f"{ENGINE}-rev-{digest}",
        f"{ENGINE}-rev-{digest}-headless",
    }


async def evict(kube: KubeClient, namespace: str, name: str) -> Mapping[str, Any]:
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    answer: Mapping[str, Any] = await kube.request(
        "POST", PODS.path(namespace, name, "eviction"), body=body
    )
    return answer


async def test_a_components_services_budget_and_their_lifecycle(
    kube: KubeClient, namespace: str, managers: Any, control_plane: Any
) -> None:
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    await world.start_manager("manager-0")
    async with world.running(NoWatcher(), nodes=2):
        await world.create_service(
            runtime(8080),
            support.inference_service(
                SERVICE, runtime="srt-svc", engine={"minReplicas": 3, "maxReplicas": 3}
            ),
        )

        async def ready_engine() -> list[dict[str, Any]] | None:
            world.check_manager()
            pods = await engine_pods(kube, namespace)
            if len(pods) == 3 and all(pod_ready(p) and p["status"].get("podIP") for p in pods):
                return pods
            return None

        pods = await eventually(ready_engine, timeout=TIMEOUT, what="3 Ready engine pods")
        (digest,) = hashes(pods)

        # -- the Services, as omed writes them ----------------------------------------------
        async def all_services() -> dict[str, dict[str, Any]] | None:
            found = await services(kube, namespace)
            return found if engine_services(digest) <= set(found) else None

        found = await eventually(all_services, timeout=TIMEOUT, what="the engine's Services")
        traffic, headless = found[ENGINE], found[f"{ENGINE}-headless"]
        identity = {LABEL_INFERENCE_SERVICE: SERVICE, LABEL_COMPONENT: "engine"}
        assert traffic["spec"]["selector"] == identity
        assert [(p["name"], p["port"], p["targetPort"]) for p in traffic["spec"]["ports"]] == [
            ("http", 8080, 8080)
        ]
        assert traffic["spec"]["clusterIP"] != "None"
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["publishNotReadyAddresses"] is True
        revision = found[f"{ENGINE}-rev-{digest}"]
        # omed's pods carry ome.io/revision-hash: the per-revision Services select on it
        assert revision["spec"]["selector"][LABEL_REVISION_HASH] == digest
        (owner,) = traffic["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "InferenceReplica",
            ENGINE,
            True,
        )

        # -- EndpointSlices, made by the real EndpointSlice controller ----------------------
        pod_ips = {p["status"]["podIP"] for p in pods}

        def slices_list_the_pods() -> list[dict[str, Any]] | None:
            items = kubectl_json(
                control_plane,
                "get",
                "endpointslices",
                "-n",
                namespace,
                "-l",
                f"kubernetes.io/service-name={ENGINE}",
                "-o",
                "json",
            )["items"]
            ready = {
                address
                for piece in items
                for endpoint in piece.get("endpoints") or ()
                if (endpoint.get("conditions") or {}).get("ready")
                for address in endpoint.get("addresses") or ()
            }
            return items if ready == pod_ips else None

        slices = await eventually(
            slices_list_the_pods, timeout=TIMEOUT, what="EndpointSlices of the engine pods' IPs"
        )
        for piece in slices:
            labels = piece["metadata"]["labels"]
            assert labels[LABEL_INFERENCE_SERVICE] == SERVICE  # copied from the Service
            assert labels[LABEL_COMPONENT] == "engine"

        # -- the PodDisruptionBudget, and the Eviction API enforcing it --------------------
        async def budget_in_force() -> dict[str, Any] | None:
            try:
                pdb = await kube.get(POD_DISRUPTION_BUDGETS, ENGINE, namespace)
            except NotFound:
                return None
            status = pdb.get("status") or {}
            settled = status.get("observedGeneration") == pdb["metadata"]["generation"]
            in_force = status.get("currentHealthy") == 3 and status.get("disruptionsAllowed") == 1
            return pdb if settled and in_force else None

        pdb = await eventually(budget_in_force, timeout=TIMEOUT, what="the engine's budget")
        # maxUnavailable 1 (the chart's) of 3 Instances of 1 pod: 2 pods stay.
        assert pdb["spec"]["minAvailable"] == 2
        assert pdb["spec"]["selector"] == {"matchLabels": identity}
        first, second = sorted(p["metadata"]["name"] for p in pods)[:2]
        await evict(kube, namespace, first)
        with pytest.raises(TooManyRequests) as refused:
            await evict(kube, namespace, second)
        assert refused.value.status == 429
        assert "disruption budget" in str(refused.value)
        await eventually(ready_engine, timeout=TIMEOUT, what="the evicted Instance back")

        # -- a user's label survives; a port change moves the Service's port ---------------
        await kube.patch(SERVICES, ENGINE, {"metadata": {"labels": {"team": "serving"}}}, namespace)
        current = await kube.get(SERVING_RUNTIMES, "srt-svc", namespace)
        current["spec"]["engineConfig"]["runner"]["ports"] = [
            {"name": "http", "containerPort": 9090}
        ]
        await kube.replace(SERVING_RUNTIMES, current, namespace)

        async def rolled_out() -> dict[str, dict[str, Any]] | None:
            world.check_manager()
            pods = await ready_engine()
            if pods is None or hashes(pods) == {digest} or len(hashes(pods)) != 1:
                return None
            (new,) = hashes(pods)
            found = await services(kube, namespace)
            engine_names = {n for n in found if n.startswith(ENGINE)}
            return found if engine_names == engine_services(new) else None

        found = await eventually(
            rolled_out, timeout=3 * TIMEOUT, what="the rollout, and only the new revision's pair"
        )
        traffic = found[ENGINE]
        assert [(p["port"], p["targetPort"]) for p in traffic["spec"]["ports"]] == [(9090, 9090)]
        assert traffic["metadata"]["labels"]["team"] == "serving"
        assert f"{ENGINE}-rev-{digest}" not in found

        # -- deleting the InferenceService removes them all (the garbage collector) --------
        await kube.delete(INFERENCE_SERVICES, SERVICE, namespace)

        async def all_gone() -> bool:
            world.check_manager()
            left = await services(kube, namespace)
            budgets = await kube.list_all(POD_DISRUPTION_BUDGETS, namespace, labelSelector=IDENTITY)
            return not left and not budgets

        await eventually(all_gone, timeout=TIMEOUT, what="the Services and budget gone")
