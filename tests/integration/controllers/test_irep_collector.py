"""The InferenceReplica controller beside the real garbage collector (kube-controller-manager's).

Each test deletes an InferenceReplica in one of the ways a user can, and checks what omed
and the collector then do (docs/controllers.md, "Deletion and the garbage collector"):

* ``propagationPolicy: Orphan``: the collector takes the pods' owner references off; omed
  leaves them serving, and a replica of the same name created again adopts them;
* ``propagationPolicy: Foreground``: the collector deletes the pods itself, at once; omed's
  finalizer lets go once they are gone;
* omed's finalizer removed by hand: the collector deletes the pods as soon as the replica
  is gone, routed or not (why omed's finalizer exists); while it lags, omed drains them,
  and frees their names for a replica created again.

A collector that lags is played by a ValidatingAdmissionPolicy that refuses the collector's
pod deletes in the test's namespace (:func:`collector_cannot_delete_pods`): the collector
runs and tries, as one would while its queue is long, and gets nowhere until the test ends.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from test_inferencereplica import Cluster, cluster, eventually, irep_body, ready

from omed.controllers.inferencereplica.core import names
from omed.kube.client import KubeClient, Resource
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import CONFIGMAPS, INFERENCE_REPLICAS, PODS

pytestmark = pytest.mark.integration
__all__ = ["cluster", "collector_cannot_delete_pods", "collector_watches_ome_kinds"]

COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
"""The user the controller manager's garbage collector acts as (its own ServiceAccount)."""
POLICIES = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    namespaced=False,
)
BINDINGS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)
LAGGING = "the garbage collector lags (test policy)"
IS_COLLECTOR = f"request.userInfo.username == '{COLLECTOR}'"


async def collector_watches_ome_kinds(kube: KubeClient, namespace: str) -> None:
    """Wait until the collector acts on ome.io owners: it finds new CRDs by discovery, every
    30 s, so for a while after the CRDs are installed it can't see an InferenceReplica go.
    A probe: a ConfigMap owned by a throwaway InferenceReplica is collected once it's gone."""

    async def collected() -> bool:
        name = f"gc-probe-{uuid.uuid4().hex[:6]}"
        owner = await kube.create(INFERENCE_REPLICAS, irep_body(name, replicas=0), namespace)
        ref = {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceReplica",
            "name": name,
            "uid": owner["metadata"]["uid"],
        }
        body = {"metadata": {"name": name, "ownerReferences": [ref]}}
        await kube.create(CONFIGMAPS, body, namespace)
        await kube.patch(INFERENCE_REPLICAS, name, {"metadata": {"finalizers": None}}, namespace)
        await kube.delete(INFERENCE_REPLICAS, name, namespace)

        async def dependent_gone() -> bool:
            try:
                await kube.get(CONFIGMAPS, name, namespace)
            except NotFound:
                return True
            return False

        try:
            await eventually(dependent_gone, timeout=3, what="the probe to be collected")
        except AssertionError:
            with contextlib.suppress(NotFound):
                await kube.delete(CONFIGMAPS, name, namespace)
            return False
        return True

    await eventually(collected, timeout=90, what="the garbage collector to see InferenceReplicas")


@contextlib.asynccontextmanager
async def collector_cannot_delete_pods(
    kube: KubeClient, namespace: str, *, probe_pod: str
) -> AsyncIterator[None]:
    """Until the block ends, the API server refuses the garbage collector's pod deletes in
    ``namespace``: a collector that lags. Ready once a dry-run delete of ``probe_pod`` as
    the collector is refused."""
    name = f"omed-test-gc-lags-{namespace}"
    await kube.create(
        POLICIES,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["DELETE"],
                            "resources": ["pods"],
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                },
                "matchConditions": [{"name": "collector", "expression": IS_COLLECTOR}],
                "validations": [{"expression": "false", "message": LAGGING}],
            },
        },
    )
    await kube.create(
        BINDINGS,
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        },
    )
    collector = KubeClient(kube.config.impersonating(COLLECTOR), qps=100, burst=100)

    async def refused() -> bool:
        dry_run = {"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]}
        try:
            await collector.request("DELETE", PODS.path(namespace, probe_pod), body=dry_run)
        except ApiError as err:
            return LAGGING in err.message
        return False

    try:
        await eventually(refused, timeout=30, what="the policy to refuse the collector")
        yield
    finally:
        await collector.close()
        for resource in (BINDINGS, POLICIES):
            with contextlib.suppress(NotFound):
                await kube.delete(resource, name)


def serving(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "ome.io/serving" and c.get("status") == "True" for c in conditions)


async def strip_finalizer_and_delete(cluster: Cluster, name: str) -> None:
    """Remove omed's finalizer by hand (as one does with a deletion that seems stuck), then
    delete the replica: it is gone at once, whatever its pods."""
    patch = {"metadata": {"finalizers": None}}
    await cluster.kube.patch(INFERENCE_REPLICAS, name, patch, cluster.namespace)
    await cluster.kube.delete(INFERENCE_REPLICAS, name, cluster.namespace)
    with pytest.raises(NotFound):
        await cluster.get(name)


async def gone(cluster: Cluster, name: str) -> bool:
    try:
        await cluster.get(name)
    except NotFound:
        return True
    return False


# -- propagationPolicy: Orphan ------------------------------------------------------------------


async def orphan_delete(cluster: Cluster, name: str) -> dict[str, str]:
    """Converge ``name`` with 2 Instances, delete it with propagationPolicy Orphan, wait until
    it is gone; the pods' uids by name."""
    await cluster.controller()
    await cluster.create(irep_body(name, replicas=2))
    await eventually(lambda: cluster.converged(name, 2), what="2 Instances")
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await cluster.pods()}
    await cluster.kube.delete(
        INFERENCE_REPLICAS, name, cluster.namespace, propagation_policy="Orphan"
    )
    await eventually(lambda: gone(cluster, name), what="the replica to be gone")
    return before


async def test_a_replica_deleted_with_propagation_orphan_leaves_its_pods_serving(
    cluster: Cluster, kube: KubeClient
) -> None:
    await collector_watches_ome_kinds(kube, cluster.namespace)
    before = await orphan_delete(cluster, "kept")
    pods = await cluster.pods()
    # The collector took the owner references off; omed drained nothing, deleted nothing.
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == before
    assert [p["metadata"].get("ownerReferences") for p in pods] == [None, None]
    assert all(ready(p) and serving(p) for p in pods)
    assert cluster.watch.deleted == set()


async def test_a_replica_created_again_adopts_the_pods_an_orphan_deletion_left(
    cluster: Cluster, kube: KubeClient
) -> None:
    await collector_watches_ome_kinds(kube, cluster.namespace)
    before = await orphan_delete(cluster, "kept")
    # Created again with one Instance: it adopts both, then scales down as usual.
    created = await cluster.create(irep_body("kept", replicas=1))
    await eventually(lambda: cluster.converged("kept", 1), what="1 Instance of the new one")
    pods = await cluster.pods()
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == {
        "kept-0-default-0": before["kept-0-default-0"]
    }
    owners = {ref["uid"] for ref in pods[0]["metadata"]["ownerReferences"]}
    assert owners == {created["metadata"]["uid"]}
    assert cluster.watch.deleted == {before["kept-1-default-0"]}
    assert cluster.watch.routed_deletions == []
    assert ("InferenceReplica", "kept", names.EVENT_PODS_ADOPTED) in cluster.events.seen


# -- propagationPolicy: Foreground --------------------------------------------------------------


async def test_a_foreground_deletion_is_the_collectors_and_omeds_finalizer_lets_go_after(
    cluster: Cluster, kube: KubeClient
) -> None:
    await collector_watches_ome_kinds(kube, cluster.namespace)
    first = await cluster.controller()
    await cluster.create(irep_body("fore", replicas=3))
    await eventually(lambda: cluster.converged("fore", 3), what="3 Instances")
    await first.kill()  # so that only the collector acts on the pods
    deleting = await cluster.kube.delete(
        INFERENCE_REPLICAS, "fore", cluster.namespace, propagation_policy="Foreground"
    )
    assert set(deleting["metadata"]["finalizers"]) == {names.FINALIZER, "foregroundDeletion"}

    async def pods_gone() -> bool:
        return not await cluster.pods()

    await eventually(pods_gone, what="the collector to delete the pods")
    # It deleted them without a drain, and let go of the owner without waiting for omed.
    assert sorted(cluster.watch.routed_deletions) == [f"fore-{i}-default-0" for i in range(3)]
    # The collector takes foregroundDeletion off once its graph has seen the pods go (a
    # moment after the API server has); omed's finalizer still holds the replica.

    async def only_omeds_finalizer_left() -> bool:
        held = await cluster.get("fore")
        return bool(held["metadata"]["finalizers"] == [names.FINALIZER])

    await eventually(only_omeds_finalizer_left, what="the collector to let go of the owner")
    await cluster.controller()
    await eventually(lambda: gone(cluster, "fore"), what="omed to let the replica go")


# -- omed's finalizer removed by hand -----------------------------------------------------------


async def test_without_omeds_finalizer_the_collector_deletes_the_pods_routed_or_not(
    cluster: Cluster, kube: KubeClient
) -> None:
    await collector_watches_ome_kinds(kube, cluster.namespace)
    first = await cluster.controller()
    await cluster.create(irep_body("bare", replicas=2))
    await eventually(lambda: cluster.converged("bare", 2), what="2 Instances")
    await first.kill()
    await strip_finalizer_and_delete(cluster, "bare")

    async def pods_gone() -> bool:
        return not await cluster.pods()

    await eventually(pods_gone, what="the collector to delete the pods")
    assert sorted(cluster.watch.routed_deletions) == ["bare-0-default-0", "bare-1-default-0"]


async def test_pods_left_by_a_replica_deleted_without_its_finalizer_are_drained_while_the_collector_lags(  # noqa: E501
    cluster: Cluster, kube: KubeClient
) -> None:
    first = await cluster.controller()
    await cluster.create(irep_body("lost", replicas=2))
    await eventually(lambda: cluster.converged("lost", 2), what="2 Instances")
    await first.kill()
    async with collector_cannot_delete_pods(kube, cluster.namespace, probe_pod="lost-0-default-0"):
        await strip_finalizer_and_delete(cluster, "lost")
        await cluster.controller()

        async def drained() -> bool:
            return not await cluster.pods()

        await eventually(drained, what="the orphaned pods to be gone")
    assert cluster.watch.routed_deletions == []
    assert len(cluster.watch.deleted) == 2


async def test_a_replica_created_again_takes_its_names_back_while_the_collector_lags(
    cluster: Cluster, kube: KubeClient
) -> None:
    first = await cluster.controller()
    await cluster.create(irep_body("again", replicas=2))
    await eventually(lambda: cluster.converged("again", 2), what="2 Instances")
    old = {p["metadata"]["uid"] for p in await cluster.pods()}
    await first.kill()
    async with collector_cannot_delete_pods(kube, cluster.namespace, probe_pod="again-0-default-0"):
        await strip_finalizer_and_delete(cluster, "again")
        created = await cluster.create(irep_body("again", replicas=2))
        await cluster.controller()
        await eventually(lambda: cluster.converged("again", 2), what="2 Instances of the new one")
    pods = await cluster.pods()
    owners = {ref["uid"] for pod in pods for ref in pod["metadata"]["ownerReferences"]}
    assert owners == {created["metadata"]["uid"]}
    assert not old & {p["metadata"]["uid"] for p in pods}  # drained and made again
    assert cluster.watch.routed_deletions == []
