"""The ome-crd chart: its CRDs are the generated ones, it lints, it applies, and the policy
values add the CRDs that the manager looks for at start."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from omed.api import crdgen
from omed.manager.startup import POLICY_CRDS

from .charts import CRD_CHART, ROOT, Render, RenderText, run_helm, run_kubectl

pytestmark = pytest.mark.integration

DEPLOY_CRDS = ROOT / "deploy" / "crds"
CHART_CRDS = CRD_CHART / "files" / "crds"
BOTH_POLICIES = {"ome": {"rolloutPolicy": {"enabled": True}, "autoscalerPolicy": {"enabled": True}}}
REGENERATE = (
    "python -m omed.api.crdgen && "
    "python -m omed.api.crdgen --output-dir deploy/charts/ome-crd/files/crds"
)


def crds(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d.get("kind") == "CustomResourceDefinition"}


def without_chart_metadata(crd: dict[str, Any]) -> dict[str, Any]:
    crd = copy.deepcopy(crd)
    crd["metadata"].pop("labels", None)
    crd["metadata"].pop("annotations", None)
    return crd


def test_chart_crd_files_are_the_generated_ones() -> None:
    generated = crdgen.generate()
    in_deploy = {p.name: p.read_text(encoding="utf-8") for p in DEPLOY_CRDS.glob("*.yaml")}
    in_chart = {p.name: p.read_text(encoding="utf-8") for p in CHART_CRDS.glob("*.yaml")}
    assert sorted(in_chart) == sorted(in_deploy) == sorted(generated), REGENERATE
    for name, text in in_deploy.items():
        assert in_chart[name] == text, f"{CHART_CRDS / name} differs from deploy/crds: {REGENERATE}"
    assert crdgen.diff(CHART_CRDS) == "", REGENERATE


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("ome.rolloutPolicy.enabled=true",),
        ("ome.autoscalerPolicy.enabled=true",),
        (
            "ome.rolloutPolicy.enabled=true",
            "ome.autoscalerPolicy.enabled=true",
            "ome.crds.keep=false",
        ),
    ],
    ids=["defaults", "rollout", "autoscaler", "both-no-keep"],
)
def test_helm_lint(helm: str, sets: tuple[str, ...]) -> None:
    args = ["lint", "--strict", str(CRD_CHART)]
    for item in sets:
        args += ["--set", item]
    result = run_helm(helm, args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_rendered_crds_equal_deploy_crds(render: Render) -> None:
    rendered = crds(render(chart=CRD_CHART))
    expected = {
        doc["metadata"]["name"]: doc
        for path in sorted(DEPLOY_CRDS.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc
    }
    assert sorted(rendered) == sorted(expected)
    for name, crd in rendered.items():
        assert without_chart_metadata(crd) == expected[name], name
        # uninstalling the chart must not delete every InferenceService with the CRD
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert crd["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ome"


def test_keep_can_be_turned_off(render: Render) -> None:
    for crd in crds(render(chart=CRD_CHART, sets=["ome.crds.keep=false"])).values():
        assert "annotations" not in crd["metadata"]


@pytest.mark.parametrize(
    ("values", "policies"),
    [
        ({}, set()),
        ({"rolloutPolicy": {"enabled": True}}, {"rollout_policy"}),
        ({"autoscalerPolicy": {"enabled": True}}, {"autoscaler_policy"}),
        (
            {"rolloutPolicy": {"enabled": True}, "autoscalerPolicy": {"enabled": True}},
            {"rollout_policy", "autoscaler_policy"},
        ),
    ],
)
def test_policy_values_add_the_crds_the_manager_looks_for(
    render: Render, values: dict[str, Any], policies: set[str]
) -> None:
    names = set(crds(render({"ome": values}, chart=CRD_CHART)))
    generated = {definition.filename.removesuffix(".yaml") for definition in crdgen.DEFINITIONS}
    assert names == generated | {POLICY_CRDS[gate] for gate in policies}


def test_policy_crd_shape(render: Render) -> None:
    docs = render(BOTH_POLICIES, chart=CRD_CHART)
    for name, kind in (
        ("rolloutpolicies.ome.io", "RolloutPolicy"),
        ("autoscalerpolicies.ome.io", "AutoscalerPolicy"),
    ):
        crd = crds(docs)[name]
        assert crd["spec"]["group"] == "ome.io"
        assert crd["spec"]["names"]["kind"] == kind
        assert crd["spec"]["scope"] == "Namespaced"
        (version,) = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert spec["x-kubernetes-preserve-unknown-fields"] is True


async def test_rendered_crds_apply_to_the_apiserver(
    render_text: RenderText, kubectl: str, kubeconfig: str, crds_installed: None
) -> None:
    """The chart's CRDs apply over the ones the tests install (the same schema), and serve."""
    manifest = render_text(chart=CRD_CHART)
    out = run_kubectl(
        kubectl,
        kubeconfig,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=ome-crd-chart-test",
        "-f",
        "-",
        stdin=manifest,
    )
    for name in crds(list(yaml.safe_load_all(manifest))):
        assert f"customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied" in out
    run_kubectl(
        kubectl,
        kubeconfig,
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *(f"crd/{name}" for name in crds(list(yaml.safe_load_all(manifest)))),
        stdin="",
    )


def test_policy_crds_pass_server_side_validation(
    render_text: RenderText, kubectl: str, kubeconfig: str
) -> None:
    """Only a server dry run: a real policy CRD would turn the features on for the other
    tests' managers, which look for it at start."""
    docs = [
        d
        for d in yaml.safe_load_all(render_text(BOTH_POLICIES, chart=CRD_CHART))
        if d and d["metadata"]["name"] in set(POLICY_CRDS.values())
    ]
    assert len(docs) == 2
    out = run_kubectl(
        kubectl,
        kubeconfig,
        "apply",
        "--dry-run=server",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(docs),
    )
    for name in POLICY_CRDS.values():
        assert f"{name} created (server dry run)" in out
