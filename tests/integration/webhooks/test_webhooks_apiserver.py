"""The webhooks behind the real API server, driven with kubectl.

omed's webhook server runs in the test's process on a free port, with a certificate for
127.0.0.1 from a throwaway CA. Each test registers a Validating- and a
MutatingWebhookConfiguration that call it by URL, scoped by ``namespaceSelector`` to the
test's own namespace (so no other test's writes reach it), and deletes them at the end.
kubectl runs as a subprocess, asynchronously, so the event loop keeps serving the webhooks
while kubectl waits for them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from omed.config import DeployConfig
from omed.kube.client import KubeClient
from omed.kube.errors import NotFound
from omed.kube.resources import (
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
)
from omed.metrics import REGISTRY
from omed.webhooks import FeatureGates, WebhookServer, admission_handlers
from omed_devcluster.certs import CertificateAuthority

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("crds_installed")]

ISVC_VALIDATOR = "inferenceservice.ome-webhook-server.validator"
IREP_VALIDATOR = "inferencereplica.ome-webhook-server.validator"
ISVC_DEFAULTER = "inferenceservice.ome-webhook-server.defaulter"
DENIED = f'admission webhook "{ISVC_VALIDATOR}" denied the request: '
IREP_DENIED = f'admission webhook "{IREP_VALIDATOR}" denied the request: '
IREP_PATH = "/validate-ome-io-v1beta1-inferencereplica"
ISVC_PATH = "/validate-ome-io-v1beta1-inferenceservice"
MUTATE_PATH = "/mutate-ome-io-v1beta1-inferenceservice"


def isvc(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": {"name": "llama-3-2-1b-instruct"},
        "runtime": {"name": "srt-llama-3-2-1b-instruct"},
        "engine": {"minReplicas": 1, "maxReplicas": 1},
    }
    body.update(spec)
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": body,
    }


def irep(name: str, *, marked: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"ome.io/inferenceservice": "chat"}}
    if marked:
        metadata["annotations"] = {"ome.io/controller-write": "true"}
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "metadata": metadata,
        "spec": {
            "parentRef": {"name": "chat"},
            "component": "engine",
            "replicas": 1,
            "runners": [
                {
                    "name": "default",
                    "template": {"spec": {"containers": [{"name": "c", "image": "serve:1"}]}},
                }
            ],
        },
    }


def write_pair(authority: CertificateAuthority, directory: Path) -> None:
    pair = authority.issue(common_name="omed-webhook", ip_addresses=["127.0.0.1"], server=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


@dataclass
class Webhooks:
    """The running server, its registration, and kubectl against the test's namespace."""

    server: WebhookServer
    kube: KubeClient
    kubectl_path: str
    kubeconfig: str
    namespace: str
    cert_dir: Path
    config_name: str
    authority: CertificateAuthority

    async def kubectl(self, *args: str, stdin: dict[str, Any] | None = None) -> Result:
        process = await asyncio.create_subprocess_exec(
            self.kubectl_path,
            "--kubeconfig",
            self.kubeconfig,
            "-n",
            self.namespace,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        data = orjson.dumps(stdin) if stdin is not None else b""
        stdout, stderr = await asyncio.wait_for(process.communicate(data), timeout=60)
        assert process.returncode is not None
        return Result(process.returncode, stdout.decode(), stderr.decode())

    async def apply(self, manifest: dict[str, Any], *extra: str) -> Result:
        return await self.kubectl("apply", "-f", "-", *extra, stdin=manifest)

    def configurations(self, ca_pem: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
        bundle = base64.b64encode(ca_pem).decode()
        base = f"https://127.0.0.1:{self.server.port}"

        def hook(name: str, path: str, *, resource: str) -> dict[str, Any]:
            return {
                "name": name,
                "clientConfig": {"url": base + path, "caBundle": bundle},
                "rules": [
                    {
                        "apiGroups": ["ome.io"],
                        "apiVersions": ["v1beta1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [resource],  # the main resource only: no status writes
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": self.namespace}
                },
            }

        validating = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.config_name},
            "webhooks": [
                hook(
                    ISVC_VALIDATOR,
                    "/validate-ome-io-v1beta1-inferenceservice",
                    resource="inferenceservices",
                ),
                hook(IREP_VALIDATOR, IREP_PATH, resource="inferencereplicas"),
            ],
        }
        mutating = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": self.config_name},
            "webhooks": [
                hook(ISVC_DEFAULTER, MUTATE_PATH, resource="inferenceservices")
                | {"reinvocationPolicy": "Never"}
            ],
        }
        return validating, mutating

    async def register(self, ca_pem: bytes) -> None:
        validating, mutating = self.configurations(ca_pem)
        for resource, body in ((VALIDATING_WEBHOOKS, validating), (MUTATING_WEBHOOKS, mutating)):
            try:
                current = await self.kube.get(resource, self.config_name)
            except NotFound:
                await self.kube.create(resource, body)
            else:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await self.kube.replace(resource, body)

    async def unregister(self) -> None:
        for resource in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
            with contextlib.suppress(NotFound):
                await self.kube.delete(resource, self.config_name)

    async def wait_until_served(self, *, timeout: float = 60.0) -> Result:
        """Until a server-side dry run of a bad InferenceService is refused by our validator
        (the API server picks up webhook configurations, and CA bundles, asynchronously)."""
        probe = isvc("probe", engine={"minReplicas": 2, "maxReplicas": 1})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = await self.kubectl("create", "--dry-run=server", "-f", "-", stdin=probe)
            if DENIED in result.stderr:
                return result
            assert loop.time() < deadline, f"webhook never served: {result.stderr}"
            await asyncio.sleep(0.2)


async def deploy_entry() -> DeployConfig:
    return DeployConfig.model_validate(
        {"defaultDeploymentMode": "OMENative", "replicas": {"minReplicas": 1, "maxReplicas": 2}}
    )


@pytest.fixture
async def webhooks(
    control_plane: Any, kubeconfig: str, kube: KubeClient, namespace: str, tmp_path: Path
) -> AsyncIterator[Webhooks]:
    authority = CertificateAuthority.create("omed-webhook-itest-ca")
    cert_dir = tmp_path / "serving-certs"
    cert_dir.mkdir()
    write_pair(authority, cert_dir)
    server = WebhookServer(
        handlers=admission_handlers(gates=FeatureGates(), deploy_config=deploy_entry),
        port=0,
        host="127.0.0.1",
        cert_dir=cert_dir,
        cert_poll_interval=0.1,
    )
    await server.start()
    hooks = Webhooks(
        server=server,
        kube=kube,
        kubectl_path=str(control_plane.binaries.kubectl),
        kubeconfig=kubeconfig,
        namespace=namespace,
        cert_dir=cert_dir,
        config_name=f"omed-webhooks-{namespace}",
        authority=authority,
    )
    try:
        await hooks.register(authority.cert_pem)
        await hooks.wait_until_served()
        yield hooks
    finally:
        await hooks.unregister()
        await server.stop()


async def test_bad_inferenceservice_is_refused_with_the_field(webhooks: Webhooks) -> None:
    result = await webhooks.apply(isvc("chat", engine={"minReplicas": 3, "maxReplicas": 1}))
    assert result.code != 0
    assert DENIED + "spec.engine.minReplicas: must be <= maxReplicas (1), got 3" in result.stderr


async def test_policy_reference_refused_while_the_feature_is_off(webhooks: Webhooks) -> None:
    manifest = isvc(
        "chat",
        rollout={"groups": [{"components": ["engine"], "policyRef": {"name": "canary-10"}}]},
    )
    result = await webhooks.apply(manifest)
    assert result.code != 0
    assert "spec.rollout.groups[0].policyRef: references RolloutPolicy" in result.stderr
    assert "(RolloutPolicyRefUnsupported)" in result.stderr
    manifest = isvc("chat")
    manifest["spec"]["engine"]["autoscalerPolicyRef"] = {"name": "request-activity-v1"}
    result = await webhooks.apply(manifest)
    assert result.code != 0 and "(AutoscalerPolicyFeatureDisabled)" in result.stderr


async def test_bad_migration_request_is_refused(webhooks: Webhooks) -> None:
    uuid = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
    request = {"schemaVersion": "v1", "component": "engine", "instance": -1, "from_node": "n"}
    manifest = isvc("chat")
    manifest["metadata"]["annotations"] = {
        f"ome.io/migration-request-v1-{uuid}": orjson.dumps(request).decode()
    }
    result = await webhooks.apply(manifest)
    assert result.code != 0
    assert f"migration request {uuid}: instance must be >= 0, got -1" in result.stderr


async def test_good_inferenceservice_is_admitted_and_defaulted(webhooks: Webhooks) -> None:
    manifest = isvc("chat", router={"minReplicas": 0})
    del manifest["spec"]["engine"]["maxReplicas"]
    result = await webhooks.apply(manifest)
    assert result.code == 0, result.stderr
    assert "inferenceservice.ome.io/chat created" in result.stdout
    assert "Warning: spec.router.minReplicas: 0 lets the component run no Instances" in (
        result.stderr
    )
    stored = await webhooks.kube.get(INFERENCE_SERVICES, "chat", webhooks.namespace)
    assert stored["metadata"]["annotations"]["ome.io/deploymentMode"] == "OMENative"
    assert stored["spec"]["engine"] == {"minReplicas": 1, "maxReplicas": 2}
    assert stored["spec"]["router"] == {"minReplicas": 0, "maxReplicas": 2}
    # An unrelated update is admitted, and the mode is not defaulted again on UPDATE.
    result = await webhooks.kubectl("label", "inferenceservice", "chat", "team=a")
    assert result.code == 0, result.stderr
    result = await webhooks.kubectl("delete", "inferenceservice", "chat", "--wait=true")
    assert result.code == 0, result.stderr


async def test_inferencereplica_writes_need_the_controller_mark(webhooks: Webhooks) -> None:
    result = await webhooks.apply(irep("chat-engine", marked=False))
    assert result.code != 0
    assert IREP_DENIED + 'metadata.annotations[ome.io/controller-write]: must be "true"' in (
        result.stderr
    )
    result = await webhooks.apply(irep("chat-engine", marked=True))
    assert result.code == 0, result.stderr

    result = await webhooks.kubectl(
        "annotate", "inferencereplica", "chat-engine", "ome.io/release-held-revision=7f9c4d2b"
    )
    assert result.code != 0
    assert "must name a full revision of this replica" in result.stderr
    result = await webhooks.kubectl(
        "annotate",
        "inferencereplica",
        "chat-engine",
        "ome.io/release-held-revision=chat-engine-7f9c4d2b",
    )
    assert result.code == 0, result.stderr

    # Status writes are not sent to the webhook (its rules name the main resource only).
    labels = {"webhook": IREP_PATH, "code": "200"}
    before = REGISTRY.get_sample_value("controller_runtime_webhook_requests_total", labels)
    stored = await webhooks.kube.get(INFERENCE_REPLICAS, "chat-engine", webhooks.namespace)
    stored["status"] = {"replicas": 0, "observedGeneration": 1}
    await webhooks.kube.replace_status(INFERENCE_REPLICAS, stored, webhooks.namespace)
    after = REGISTRY.get_sample_value("controller_runtime_webhook_requests_total", labels)
    assert after == before


async def presents_certificate_of(port: int, authority: CertificateAuthority) -> bool:
    context = ssl.create_default_context(cadata=authority.cert_pem.decode())
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    except ssl.SSLError:
        return False
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return True


async def test_certificate_rotation(webhooks: Webhooks) -> None:
    old_ca = webhooks.authority
    assert await presents_certificate_of(webhooks.server.port, old_ca)
    loads = webhooks.server.certificate.loads
    new_ca = CertificateAuthority.create("omed-webhook-itest-ca-2")
    write_pair(new_ca, webhooks.cert_dir)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while webhooks.server.certificate.loads == loads:  # the poller checks every 0.1 s here
        assert loop.time() < deadline, "the new certificate was never loaded"
        await asyncio.sleep(0.05)
    # New handshakes present the new certificate: the old CA no longer verifies it.
    assert await presents_certificate_of(webhooks.server.port, new_ca)
    assert not await presents_certificate_of(webhooks.server.port, old_ca)
    await webhooks.register(new_ca.cert_pem)
    refused = await webhooks.wait_until_served()
    assert "x509" not in refused.stderr
    result = await webhooks.apply(isvc("rotated"))
    assert result.code == 0, result.stderr
    assert "inferenceservice.ome.io/rotated created" in result.stdout
