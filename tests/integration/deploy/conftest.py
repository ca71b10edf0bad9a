"""Fixtures for the chart tests: the real helm binary, and rendering helpers.

Every test here runs helm v3 itself (``omed_devcluster.binaries``), never a re-implementation
of its template engine, so what the tests see is what ``helm install`` would send; the alert
rules are checked by Prometheus's own promtool, built the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from .charts import RESOURCES_CHART, Render, RenderError, RenderText, run_helm


@pytest.fixture(scope="session")
def helm() -> str:
    from omed_devcluster.binaries import ensure_binaries

    return str(ensure_binaries().helm)


@pytest.fixture(scope="session")
def promtool() -> str:
    """Prometheus's promtool, found or built from its Go module as helm is (the first use
    builds it into the binaries' cache); a test that needs it fails, never skips, without
    it."""
    from omed_devcluster.binaries import ensure_promtool

    return str(ensure_promtool())


@pytest.fixture(scope="session")
def kubectl() -> str:
    from omed_devcluster.binaries import ensure_binaries

    return str(ensure_binaries().kubectl)


@pytest.fixture(scope="session")
def kube_version() -> str:
    """The control plane's Kubernetes version, which ``helm template`` renders for (as
    ``helm install`` reads it from the API server). The helm built from Go modules isn't
    stamped with its client-go version, and would otherwise assume v1.20.0, below the
    charts' ``kubeVersion``."""
    from omed_devcluster.binaries import ensure_binaries

    return ensure_binaries().kubernetes_version


def _template_args(
    chart: Path,
    *,
    values: Mapping[str, Any] | None,
    sets: Sequence[str],
    set_strings: Sequence[str],
    namespace: str,
    api_versions: Sequence[str],
    kube_version: str,
    tmp_path: Path,
) -> list[str]:
    args = ["template", "ome", str(chart), "--namespace", namespace]
    args += ["--kube-version", kube_version]
    if values is not None:
        path = tmp_path / f"values-{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(yaml.safe_dump(dict(values), sort_keys=False))
        args += ["--values", str(path)]
    for item in sets:
        args += ["--set", item]
    for item in set_strings:
        args += ["--set-string", item]
    for version in api_versions:
        args += ["--api-versions", version]
    return args


@pytest.fixture
def render_text(helm: str, kube_version: str, tmp_path: Path) -> RenderText:
    """``helm template`` of a chart; the YAML stream. Fails the test when helm fails."""

    def render(
        values: Mapping[str, Any] | None = None,
        *,
        chart: Path = RESOURCES_CHART,
        sets: Sequence[str] = (),
        set_strings: Sequence[str] = (),
        namespace: str = "ome",
        api_versions: Sequence[str] = (),
    ) -> str:
        result = run_helm(
            helm,
            _template_args(
                chart,
                values=values,
                sets=sets,
                set_strings=set_strings,
                namespace=namespace,
                api_versions=api_versions,
                kube_version=kube_version,
                tmp_path=tmp_path,
            ),
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    return render


@pytest.fixture
def render(render_text: RenderText) -> Render:
    """``helm template`` of a chart, parsed: the list of rendered objects."""

    def parsed(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [doc for doc in yaml.safe_load_all(render_text(*args, **kwargs)) if doc]

    return parsed


@pytest.fixture
def render_error(helm: str, kube_version: str, tmp_path: Path) -> RenderError:
    """``helm template`` that must fail; its stderr."""

    def render(
        values: Mapping[str, Any] | None = None,
        *,
        chart: Path = RESOURCES_CHART,
        sets: Sequence[str] = (),
        set_strings: Sequence[str] = (),
        namespace: str = "ome",
    ) -> str:
        result = run_helm(
            helm,
            _template_args(
                chart,
                values=values,
                sets=sets,
                set_strings=set_strings,
                namespace=namespace,
                api_versions=(),
                kube_version=kube_version,
                tmp_path=tmp_path,
            ),
        )
        assert result.returncode != 0, "helm template succeeded; expected it to fail"
        return result.stderr

    return render
