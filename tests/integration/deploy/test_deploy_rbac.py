"""The ome-resources chart against the real API server: every rendered object passes the
server's validation, and the manager's ServiceAccount can do its job and nothing more.

The ClusterRole and Role are applied for real and checked with SubjectAccessReviews, as the
API server's RBAC authorizer sees the ServiceAccount, and with requests sent as the
ServiceAccount (impersonation). The webhook configurations are only dry-run: applied for
real, they would send every InferenceService write of the other tests to a webhook that
doesn't run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from omed.kube.client import KubeClient, Resource, load_config
from omed.kube.errors import Forbidden
from omed.kube.resources import CONFIGMAPS, INFERENCE_SERVICES, LEASES, PODS, SECRETS

from .charts import RenderText, run_kubectl

pytestmark = pytest.mark.integration

SERVICE_ACCOUNT = "ome-controller-manager"
OTHER = "serving"  # a workload namespace: InferenceServices live outside the manager's
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)


@dataclass(frozen=True)
class Check:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str | None = OTHER  # None: cluster-scoped (or all namespaces); "<own>": its own
    allowed: bool = True

    def describe(self, own: str) -> str:
        target = self.resource + (f"/{self.subresource}" if self.subresource else "")
        named = f" {self.name}" if self.name else ""
        return (
            f"{self.verb} {self.group or 'core'}/{target}{named} in {self.where(own) or 'cluster'}"
        )

    def where(self, own: str) -> str | None:
        return own if self.namespace == "<own>" else self.namespace


OWN = "<own>"
ALLOWED = [
    # InferenceService controller
    Check("list", "inferenceservices", "ome.io", namespace=None),
    Check("watch", "inferenceservices", "ome.io", namespace=None),
    Check("patch", "inferenceservices", "ome.io"),
    Check("update", "inferenceservices", "ome.io", "status"),
    Check("update", "inferenceservices", "ome.io", "finalizers"),
    Check("create", "inferencereplicas", "ome.io"),
    Check("update", "inferencereplicas", "ome.io"),
    Check("delete", "inferencereplicas", "ome.io"),
    Check("list", "inferencereplicas", "ome.io", namespace=None),
    Check("watch", "inferencereplicas", "ome.io", namespace=None),
    Check("list", "inferencereplicas", "ome.io"),  # before the finalizer goes
    Check("list", "servingruntimes", "ome.io", namespace=None),
    Check("watch", "servingruntimes", "ome.io", namespace=None),
    Check("list", "clusterservingruntimes", "ome.io", namespace=None),
    Check("watch", "clusterservingruntimes", "ome.io", namespace=None),
    # InferenceReplica controller
    Check("update", "inferencereplicas", "ome.io", "status"),
    Check("patch", "inferencereplicas", "ome.io"),
    Check("update", "inferencereplicas", "ome.io", "finalizers"),
    Check("get", "inferencereplicas", "ome.io"),  # the orphan check
    Check("create", "pods"),
    Check("list", "controllerrevisions", "apps"),
    Check("watch", "controllerrevisions", "apps"),
    Check("create", "controllerrevisions", "apps"),
    Check("patch", "controllerrevisions", "apps"),
    Check("delete", "controllerrevisions", "apps"),
    Check("delete", "pods"),
    Check("get", "pods"),
    Check("list", "pods", namespace=None),
    Check("watch", "pods", namespace=None),
    Check("list", "pods"),  # before the finalizer goes
    Check("patch", "pods"),  # the InPlaceIfPossible image patch
    Check("patch", "pods", subresource="status"),
    # runtime revision controller: its informer, snapshots, marks and deletes, own namespace
    Check("list", "controllerrevisions", "apps", namespace=OWN),
    Check("watch", "controllerrevisions", "apps", namespace=OWN),
    Check("create", "controllerrevisions", "apps", namespace=OWN),
    Check("patch", "controllerrevisions", "apps", namespace=OWN),
    Check("delete", "controllerrevisions", "apps", namespace=OWN),
    # event recorder
    # The serving controller: each component's Services and PodDisruptionBudget.
    Check("list", "services", namespace=None),
    Check("watch", "services", namespace=None),
    Check("create", "services"),
    Check("patch", "services"),
    Check("delete", "services"),
    Check("list", "poddisruptionbudgets", "policy", namespace=None),
    Check("watch", "poddisruptionbudgets", "policy", namespace=None),
    Check("create", "poddisruptionbudgets", "policy"),
    Check("patch", "poddisruptionbudgets", "policy"),
    Check("delete", "poddisruptionbudgets", "policy"),
    Check("create", "events"),
    Check("patch", "events"),
    Check("create", "events", namespace=OWN),
    # start-up checks
    Check(
        "get",
        "customresourcedefinitions",
        "apiextensions.k8s.io",
        name="inferencereplicas.ome.io",
        namespace=None,
    ),
    Check(
        "get",
        "customresourcedefinitions",
        "apiextensions.k8s.io",
        name="rolloutpolicies.ome.io",
        namespace=None,
    ),
    Check(
        "get",
        "customresourcedefinitions",
        "apiextensions.k8s.io",
        name="autoscalerpolicies.ome.io",
        namespace=None,
    ),
    # leader election, in its namespace
    Check("create", "leases", "coordination.k8s.io", namespace=OWN),
    Check(
        "get",
        "leases",
        "coordination.k8s.io",
        name="ome-controller-manager-leader-lock",
        namespace=OWN,
    ),
    Check(
        "update",
        "leases",
        "coordination.k8s.io",
        name="ome-controller-manager-leader-lock",
        namespace=OWN,
    ),
    # node facts: the stripped node informer and a fresh read before a force delete
    Check("get", "nodes", name="node-a", namespace=None),
    Check("list", "nodes", namespace=None),
    Check("watch", "nodes", namespace=None),
    # the audit ledger <isvc>-ome-migration-audit in the service's namespace: read, then
    # created or replaced (its names follow the services, so no resourceNames)
    Check("get", "configmaps", name="chat-ome-migration-audit"),
    Check("create", "configmaps"),
    Check("update", "configmaps", name="chat-ome-migration-audit"),
    # the ConfigMap, in its namespace (last: wait_for_rbac's probe of the Role)
    Check("get", "configmaps", name="inferenceservice-config", namespace=OWN),
]
DENIED = [
    Check("create", "secrets", namespace=OWN, allowed=False),
    Check("create", "secrets", allowed=False),
    Check("get", "secrets", name="ome-webhook-server-cert", namespace=OWN, allowed=False),
    Check("list", "secrets", namespace=None, allowed=False),
    Check("delete", "nodes", name="node-a", namespace=None, allowed=False),
    Check("patch", "nodes", name="node-a", namespace=None, allowed=False),
    Check("get", "inferenceservices", "ome.io", allowed=False),
    Check("get", "inferenceservices", "ome.io", "status", allowed=False),
    Check("patch", "inferenceservices", "ome.io", "status", allowed=False),
    Check("get", "inferencereplicas", "ome.io", "status", allowed=False),
    Check("patch", "inferencereplicas", "ome.io", "status", allowed=False),
    Check("get", "inferencereplicas", "ome.io", "scale", allowed=False),
    Check("update", "inferencereplicas", "ome.io", "scale", allowed=False),
    Check("patch", "inferencereplicas", "ome.io", "scale", allowed=False),
    Check("get", "servingruntimes", "ome.io", allowed=False),
    Check("get", "clusterservingruntimes", "ome.io", name="any", namespace=None, allowed=False),
    # revisions are read from the informers only, and never replaced (PUT)
    Check("get", "controllerrevisions", "apps", namespace=OWN, allowed=False),
    Check("update", "controllerrevisions", "apps", namespace=OWN, allowed=False),
    Check("get", "controllerrevisions", "apps", allowed=False),
    Check("update", "controllerrevisions", "apps", allowed=False),
    Check("list", "configmaps", namespace=OWN, allowed=False),
    Check("list", "configmaps", allowed=False),
    Check("watch", "configmaps", allowed=False),
    Check("delete", "configmaps", name="chat-ome-migration-audit", allowed=False),
    Check("patch", "configmaps", name="inferenceservice-config", namespace=OWN, allowed=False),
    Check(
        "update",
        "leases",
        "coordination.k8s.io",
        name="ome-controller-manager-leader-lock",
        allowed=False,
    ),
    Check(
        "get",
        "leases",
        "coordination.k8s.io",
        name="ome-controller-manager-leader-lock",
        allowed=False,
    ),
    Check("create", "leases", "coordination.k8s.io", allowed=False),
    Check(
        "update", "leases", "coordination.k8s.io", name="another-lock", namespace=OWN, allowed=False
    ),
    Check("create", "inferenceservices", "ome.io", allowed=False),
    Check("delete", "inferenceservices", "ome.io", allowed=False),
    Check("update", "inferenceservices", "ome.io", allowed=False),
    Check("update", "pods", allowed=False),  # the in-place update is a patch, never a PUT
    Check("update", "services", allowed=False),  # merge patches only
    Check("get", "services", allowed=False),  # read from the informer only
    Check("update", "poddisruptionbudgets", "policy", allowed=False),
    Check("patch", "poddisruptionbudgets", "policy", "status", allowed=False),
    Check("create", "endpointslices", "discovery.k8s.io", allowed=False),
    Check("create", "pods", subresource="exec", allowed=False),
    Check("create", "pods", subresource="eviction", allowed=False),
    Check("delete", "events", allowed=False),
    Check("update", "events", allowed=False),
    Check("create", "servingruntimes", "ome.io", allowed=False),
    Check(
        "update",
        "customresourcedefinitions",
        "apiextensions.k8s.io",
        name="inferencereplicas.ome.io",
        namespace=None,
        allowed=False,
    ),
    Check(
        "get",
        "customresourcedefinitions",
        "apiextensions.k8s.io",
        name="inferenceservices.ome.io",
        namespace=None,
        allowed=False,
    ),
    Check(
        "list", "customresourcedefinitions", "apiextensions.k8s.io", namespace=None, allowed=False
    ),
    Check("create", "deployments", "apps", namespace=OWN, allowed=False),
    Check("create", "clusterroles", "rbac.authorization.k8s.io", namespace=None, allowed=False),
    Check("create", "rolebindings", "rbac.authorization.k8s.io", namespace=OWN, allowed=False),
    Check(
        "create",
        "mutatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        namespace=None,
        allowed=False,
    ),
    Check(
        "create",
        "serviceaccounts",
        "",
        subresource="token",
        name=SERVICE_ACCOUNT,
        namespace=OWN,
        allowed=False,
    ),
    Check("impersonate", "users", namespace=None, allowed=False),
]


def rendered_docs(render_text: RenderText, namespace: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(render_text(namespace=namespace)) if d]


def user(namespace: str) -> tuple[str, tuple[str, ...]]:
    return (
        f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


@pytest.fixture
async def installed_rbac(
    render_text: RenderText, kubectl: str, kubeconfig: str, namespace: str, kube: KubeClient
) -> AsyncIterator[str]:
    """The chart's ServiceAccount and RBAC, applied with the test namespace as the release's."""
    docs = [d for d in rendered_docs(render_text, namespace) if d["kind"] in RBAC_KINDS]
    assert {d["kind"] for d in docs} == RBAC_KINDS
    out = run_kubectl(kubectl, kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    assert "clusterrole.rbac.authorization.k8s.io/ome-manager-role" in out
    try:
        yield namespace
    finally:
        # cluster-scoped: the namespace's deletion doesn't take them
        await kube.delete(CLUSTER_ROLE_BINDINGS, "ome-manager-rolebinding")
        await kube.delete(CLUSTER_ROLES, "ome-manager-role")


async def review(kube: KubeClient, namespace: str, check: Check) -> bool:
    name, groups = user(namespace)
    attributes = {
        "verb": check.verb,
        "group": check.group,
        "resource": check.resource,
        "subresource": check.subresource,
        "name": check.name,
    }
    where = check.where(namespace)
    if where is not None:
        attributes["namespace"] = where
    answer = await kube.request(
        "POST",
        SUBJECT_ACCESS_REVIEWS,
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": name, "groups": list(groups), "resourceAttributes": attributes},
        },
    )
    return bool(answer["status"].get("allowed"))


async def wait_for_rbac(kube: KubeClient, namespace: str) -> None:
    """The authorizer reads RBAC objects through its own informers: wait until it has them."""
    probes = [ALLOWED[0], ALLOWED[-1]]  # one from the ClusterRole, one from the Role
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not all([await review(kube, namespace, probe) for probe in probes]):
        assert loop.time() < deadline, "the RBAC authorizer never saw the chart's roles"
        await asyncio.sleep(0.2)


async def test_service_account_can_do_its_job_and_nothing_more(
    kube: KubeClient, installed_rbac: str
) -> None:
    namespace = installed_rbac
    await wait_for_rbac(kube, namespace)
    wrong = []
    for check in ALLOWED + DENIED:
        if await review(kube, namespace, check) != check.allowed:
            wrong.append(f"{'denied' if check.allowed else 'allowed'}: {check.describe(namespace)}")
    assert not wrong, "\n".join(wrong)


async def test_requests_as_the_service_account(
    kube: KubeClient, kubeconfig: str, installed_rbac: str, crds_installed: None
) -> None:
    """The same answers for real requests, sent as the ServiceAccount (impersonated)."""
    namespace = installed_rbac
    await wait_for_rbac(kube, namespace)
    name, groups = user(namespace)
    config = (await load_config(kubeconfig)).impersonating(name, groups)
    async with KubeClient(config, qps=100, burst=100) as client:
        listed = await client.list_page(INFERENCE_SERVICES, None, limit=1)
        assert listed["kind"] == "InferenceServiceList"
        assert (await client.list_page(PODS, None, limit=1))["kind"] == "PodList"
        lease = await client.create(
            LEASES,
            {"metadata": {"name": "ome-controller-manager-leader-lock"}, "spec": {}},
            namespace,
        )
        lease["spec"]["holderIdentity"] = "test"
        await client.replace(LEASES, lease, namespace)
        await kube.create(
            CONFIGMAPS,
            {"metadata": {"name": "inferenceservice-config"}, "data": {"k": "v"}},
            namespace,
        )
        assert (await client.get(CONFIGMAPS, "inferenceservice-config", namespace))["data"] == {
            "k": "v"
        }
        attempts = {
            "create a Secret": lambda: client.create(
                SECRETS, {"metadata": {"name": "x"}}, namespace
            ),
            "list Secrets": lambda: client.list_page(SECRETS, namespace),
            "delete a ConfigMap": lambda: client.delete(
                CONFIGMAPS, "inferenceservice-config", namespace
            ),
            "list ConfigMaps elsewhere": lambda: client.list_page(CONFIGMAPS, "default"),
            "get a Lease elsewhere": lambda: client.get(LEASES, "any", "default"),
        }
        for what, attempt in attempts.items():
            with pytest.raises(Forbidden):
                await attempt()
                pytest.fail(f"the ServiceAccount could {what}")


async def test_every_rendered_object_passes_server_validation(
    render_text: RenderText, kubectl: str, kubeconfig: str, namespace: str, crds_installed: None
) -> None:
    """A server-side dry run of the whole chart as rendered without cert-manager (the test
    apiserver has no cert-manager CRDs to check an Issuer or a Certificate against)."""
    docs = rendered_docs(render_text, namespace)
    out = run_kubectl(
        kubectl, kubeconfig, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(docs)
    )
    for doc in docs:
        kind, name = doc["kind"].lower(), doc["metadata"]["name"]
        assert f"/{name} created (server dry run)" in out, (kind, name, out)
    assert len(out.strip().splitlines()) == len(docs)
