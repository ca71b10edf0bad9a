"""What an operator sees of a release, with the real helm: both charts' metadata and
``kubeVersion``, the ome-resources NOTES (from ``helm install --dry-run=server`` against the
test API server), and the ``helm test`` hook, rendered and validated by the API server (no
kubelet runs its container here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from .charts import CRD_CHART, RESOURCES_CHART, Render, RenderText, find, run_helm, run_kubectl

pytestmark = pytest.mark.integration

HOOK = "ome-webhook-test"


def chart_yaml(chart: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("chart", [CRD_CHART, RESOURCES_CHART], ids=["ome-crd", "ome-resources"])
def test_chart_metadata(chart: Path) -> None:
    meta = chart_yaml(chart)
    assert meta["apiVersion"] == "v2"
    assert (meta["version"], meta["appVersion"]) == ("1.3.0", "v1.3.0")
    assert meta["description"].strip()
    assert meta["home"].startswith("https://")
    assert meta["sources"] and all(s.startswith("https://") for s in meta["sources"])
    assert meta["maintainers"] and all(m["name"] for m in meta["maintainers"])
    assert {"ome", "inference", "omenative"} <= set(meta["keywords"])
    assert meta["kubeVersion"] == ">=1.31.0-0"


@pytest.mark.parametrize("chart", [CRD_CHART, RESOURCES_CHART], ids=["ome-crd", "ome-resources"])
def test_kube_version_below_the_floor_is_refused(helm: str, chart: Path) -> None:
    result = run_helm(helm, ["template", "ome", str(chart), "--kube-version", "v1.30.4"])
    assert result.returncode != 0
    assert (
        "chart requires kubeVersion: >=1.31.0-0 which is incompatible with Kubernetes v1.30.4"
        in result.stderr
    ), result.stderr


def install_dry_run(helm: str, kubeconfig: str, namespace: str, *sets: str) -> str:
    """``helm install --dry-run=server`` against the test API server: its output (the
    manifest, the hooks and the NOTES)."""
    args = ["install", "ome", str(RESOURCES_CHART), "--namespace", namespace]
    args += ["--kubeconfig", kubeconfig, "--dry-run=server"]
    for item in sets:
        args += ["--set", item]
    result = run_helm(helm, args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def notes(output: str) -> str:
    assert "\nNOTES:\n" in output, output
    return output.split("\nNOTES:\n", 1)[1]


async def test_notes_say_what_was_installed_and_how_to_check_it(
    helm: str, kubeconfig: str, namespace: str
) -> None:
    output = install_dry_run(helm, kubeconfig, namespace)
    text = notes(output)
    for line in [
        f"is installed in namespace {namespace}",
        "Deployment       ome-controller-manager, 3 replicas",
        "ConfigMap        inferenceservice-config",
        "ome-validating-webhook-configuration, ome-mutating-webhook-configuration",
        "through Service ome-webhook-server-service (selfSigned certificate, "
        "Secret ome-webhook-server-cert)",
        "PodDisruptionBudget ome-controller-manager",
        f"kubectl rollout status deployment ome-controller-manager -n {namespace}",
        f"kubectl get lease ome-controller-manager-leader-lock -n {namespace}",
        f"kubectl get endpointslices -n {namespace} "
        "-l kubernetes.io/service-name=ome-webhook-server-service",
        f"helm test ome -n {namespace}",
    ]:
        assert line in text, f"{line!r} not in the NOTES:\n{text}"
    # the hook is part of the release, not of its manifest
    hooks = output.split("\nHOOKS:\n", 1)[1].split("\nMANIFEST:\n", 1)[0]
    assert f"name: {HOOK}" in hooks
    assert "helm.sh/hook: test" in hooks


async def test_notes_ask_for_an_image_when_the_default_is_left(
    helm: str, kubeconfig: str, namespace: str
) -> None:
    """The default repository names no registry, so the NOTES say to set it; with the
    operator's own image they don't."""
    hint = "Set ome.controller.image.repository (and tag) to the image you"
    assert hint in notes(install_dry_run(helm, kubeconfig, namespace))
    own = notes(
        install_dry_run(
            helm, kubeconfig, namespace, "ome.controller.image.repository=REGISTRY/omed"
        )
    )
    assert "image REGISTRY/omed:v1.3.0" in own
    assert hint not in own


async def test_notes_of_a_parked_manager(helm: str, kubeconfig: str, namespace: str) -> None:
    text = notes(
        install_dry_run(
            helm,
            kubeconfig,
            namespace,
            "ome.controller.replicaCount=0",
            "ome.controller.podDisruptionBudget.enabled=false",
        )
    )
    assert "replicaCount is 0: the manager is parked." in text
    assert "rollout status" not in text
    assert "PodDisruptionBudget" not in text


def test_hook_reaches_the_webhook_service_with_the_charts_ca(render: Render) -> None:
    docs = render(namespace="ome-system")
    pod = find(docs, "Pod", HOOK)
    assert pod["metadata"]["namespace"] == "ome-system"
    assert pod["metadata"]["annotations"] == {
        "helm.sh/hook": "test",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
    }
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    manager = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    # the manager's image: no other image to mirror or pull
    assert container["image"] == manager["image"]
    assert container["securityContext"] == manager["securityContext"]
    assert container["command"] == ["python3", "-c"]
    (script,) = container["args"]
    compile(script, HOOK, "exec")
    assert '"ome-webhook-server-service.ome-system.svc"' in script
    assert "/validate-ome-io-v1beta1-inferenceservice" in script
    assert 'cafile="/ca/ca.crt"' in script
    # only the CA of the webhook certificate's Secret, never its key
    assert spec["volumes"] == [
        {
            "name": "ca",
            "secret": {
                "secretName": "ome-webhook-server-cert",
                "defaultMode": 288,
                "items": [{"key": "ca.crt", "path": "ca.crt"}],
            },
        }
    ]
    assert container["volumeMounts"] == [{"name": "ca", "mountPath": "/ca", "readOnly": True}]


def test_hook_follows_the_pods_scheduling_values(render: Render) -> None:
    values = {
        "ome": {
            "controller": {
                "image": {"repository": "mirror.internal/ome/ome-manager", "tag": "v1.3.1"},
                "imagePullSecrets": [{"name": "pull"}],
                "nodeSelector": {"pool": "control"},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            }
        }
    }
    spec = find(render(values), "Pod", HOOK)["spec"]
    assert spec["containers"][0]["image"] == "mirror.internal/ome/ome-manager:v1.3.1"
    assert spec["imagePullSecrets"] == [{"name": "pull"}]
    assert spec["nodeSelector"] == {"pool": "control"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]


async def test_hook_and_budget_pass_server_validation(
    render_text: RenderText, kubectl: str, kubeconfig: str, namespace: str
) -> None:
    docs = [d for d in yaml.safe_load_all(render_text(namespace=namespace)) if d]
    wanted = [find(docs, "Pod", HOOK), find(docs, "PodDisruptionBudget")]
    out = run_kubectl(
        kubectl,
        kubeconfig,
        "apply",
        "--dry-run=server",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(wanted),
    )
    assert f"pod/{HOOK} created (server dry run)" in out
    assert "poddisruptionbudget.policy/ome-controller-manager created (server dry run)" in out
