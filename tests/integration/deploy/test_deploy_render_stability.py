"""What changes between two renders of the same values, with the real helm: the webhook
certificate decides it (docs/deploy.md, *Rendering for GitOps*).

- ``certManager`` (and ``auto`` on a cluster that serves cert-manager.io/v1): the chart
  renders no key material, so two ``helm template`` runs are byte for byte the same; this is
  the mode for tools that render with ``helm template`` and apply the output.
- ``selfSigned`` under ``helm template``: ``lookup`` sees no cluster, so each run generates
  a new CA and certificate; only the Secret's data and the webhooks' ``caBundle`` differ.
- ``selfSigned`` under ``helm install``/``upgrade`` (here ``--dry-run=server``, which runs
  ``lookup`` against the test API server): the Secret found is reused, so every render
  carries the same certificate and a ``caBundle`` that is its ``ca.crt``.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
import yaml

from .charts import RESOURCES_CHART, RenderText, find, run_helm, run_kubectl

pytestmark = pytest.mark.integration

SECRET = "ome-webhook-server-cert"
WEBHOOK_CONFIGURATIONS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def parsed(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def without_certificate_material(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects with the Secret's data and every caBundle blanked."""
    docs = copy.deepcopy(docs)
    for doc in docs:
        if doc["kind"] == "Secret" and doc["metadata"]["name"] == SECRET:
            doc["data"] = {key: "<generated>" for key in doc["data"]}
        if doc["kind"] in WEBHOOK_CONFIGURATIONS:
            for webhook in doc["webhooks"]:
                webhook["clientConfig"]["caBundle"] = "<generated>"
    return docs


@pytest.mark.parametrize(
    ("sets", "api_versions"),
    [
        (["ome.webhook.certificate=certManager"], []),
        ([], ["cert-manager.io/v1"]),
    ],
    ids=["certManager", "auto-with-cert-manager"],
)
def test_cert_manager_renders_are_byte_for_byte_the_same(
    render_text: RenderText, sets: list[str], api_versions: list[str]
) -> None:
    first = render_text(sets=sets, api_versions=api_versions)
    second = render_text(sets=sets, api_versions=api_versions)
    assert first == second
    docs = parsed(first)
    assert find(docs, "Certificate", "ome-serving-cert")
    assert not [d for d in docs if d["kind"] == "Secret"]  # cert-manager writes it
    for kind in WEBHOOK_CONFIGURATIONS:
        for webhook in find(docs, kind)["webhooks"]:
            assert "caBundle" not in webhook["clientConfig"]  # the CA injector fills it


def test_self_signed_template_renders_differ_only_in_the_certificate(
    render_text: RenderText,
) -> None:
    first = parsed(render_text(sets=["ome.webhook.certificate=selfSigned"]))
    second = parsed(render_text(sets=["ome.webhook.certificate=selfSigned"]))
    assert first != second  # a new CA and certificate each run: lookup sees no cluster
    assert (
        find(first, "Secret", SECRET)["data"]["ca.crt"]
        != (find(second, "Secret", SECRET)["data"]["ca.crt"])
    )
    assert without_certificate_material(first) == without_certificate_material(second)


def install_dry_run(helm: str, kubeconfig: str, namespace: str) -> list[dict[str, Any]]:
    """``helm install --dry-run=server``: rendered with ``lookup`` against the API server."""
    args = ["install", "ome", str(RESOURCES_CHART), "--namespace", namespace]
    args += ["--kubeconfig", kubeconfig, "--dry-run=server"]
    args += ["--set", "ome.webhook.certificate=selfSigned"]
    result = run_helm(helm, args)
    assert result.returncode == 0, result.stderr
    manifest = result.stdout.split("\nMANIFEST:\n", 1)[1].split("\nNOTES:\n", 1)[0]
    return parsed(manifest)


async def test_self_signed_install_and_upgrade_reuse_the_secret_they_find(
    helm: str, kubectl: str, kubeconfig: str, namespace: str
) -> None:
    # what a first install writes: the Secret of a render, applied to the API server with
    # the release's ownership, as helm leaves it (the webhook configurations, cluster-wide
    # objects of fixed names, stay out of the shared test API server)
    generated = find(install_dry_run(helm, kubeconfig, namespace), "Secret", SECRET)
    owned = copy.deepcopy(generated)
    owned["metadata"].setdefault("annotations", {}).update(
        {"meta.helm.sh/release-name": "ome", "meta.helm.sh/release-namespace": namespace}
    )
    run_kubectl(kubectl, kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(owned))
    renders = [install_dry_run(helm, kubeconfig, namespace) for _ in range(2)]
    for docs in renders:
        assert find(docs, "Secret", SECRET)["data"] == generated["data"]
        for kind in WEBHOOK_CONFIGURATIONS:
            for webhook in find(docs, kind)["webhooks"]:
                bundle = webhook["clientConfig"]["caBundle"]
                assert bundle == generated["data"]["ca.crt"]
                assert base64.b64decode(bundle).startswith(b"-----BEGIN CERTIFICATE-----")
    assert renders[0] == renders[1]
