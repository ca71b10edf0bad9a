"""Where promtool comes from (omed_devcluster.binaries.ensure_promtool): the environment's
``TEST_ASSET_PROMTOOL`` first, then the cache; and the Prometheus release its Go module
version stands for (stamped into the binary, so ``promtool --version`` says it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omed_devcluster.binaries import (
    PROMTOOL_VERSION,
    BinaryError,
    ensure_promtool,
    prometheus_release,
)


def test_a_go_module_version_names_its_prometheus_release() -> None:
    assert prometheus_release("v0.316.0") == "3.16.0"
    assert prometheus_release("v0.313.5") == "3.13.5"
    assert prometheus_release("v0.309.1") == "3.9.1"


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/true\n")
    path.chmod(0o755)
    return path


def test_the_environment_names_promtool_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = executable(tmp_path / "bin" / "promtool")
    executable(tmp_path / "cache" / f"promtool-{PROMTOOL_VERSION}" / "promtool")
    monkeypatch.setenv("TEST_ASSET_PROMTOOL", str(mine))
    assert ensure_promtool(root=tmp_path / "cache") == mine


def test_a_cached_promtool_is_used_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEST_ASSET_PROMTOOL", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv("PATH", os.defpath)  # no go: a build would fail
    cached = executable(tmp_path / f"promtool-{PROMTOOL_VERSION}" / "promtool")
    assert ensure_promtool(root=tmp_path) == cached


def test_a_named_promtool_that_is_not_executable_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ASSET_PROMTOOL", str(tmp_path / "missing"))
    with pytest.raises(BinaryError, match="TEST_ASSET_PROMTOOL"):
        ensure_promtool(root=tmp_path)
