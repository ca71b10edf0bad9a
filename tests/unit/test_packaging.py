"""The product's wheel (what ``pip install .`` installs, and what the image is made of) holds
omed and nothing of the dev cluster: the control plane launcher, the node simulator, the
chart installer and the demo are the ``omed-devcluster`` distribution in ``devcluster/``."""

from __future__ import annotations

import ast
import shutil
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version
from product_wheel import ROOT, build_wheel, copy_checkout, dev_cluster_code


def test_pip_install_dot_installs_no_dev_cluster_code(tmp_path: Path) -> None:
    wheel = build_wheel(copy_checkout(tmp_path / "src"), tmp_path / "wheels")
    assert wheel.name.startswith("omed-0")
    assert dev_cluster_code(wheel) == []
    # the product is all there
    assert {"omed/__main__.py", "omed/manager/__init__.py", "omed/py.typed"} <= set(wheel.members)
    assert "omed = omed.__main__:main" in wheel.entry_points


def test_a_dev_cluster_package_beside_omed_stays_out(tmp_path: Path) -> None:
    """The product's package discovery names omed only: omed_devcluster moved beside omed/
    (where ``include = ["omed*"]`` would match it) is still left out."""
    source = copy_checkout(tmp_path / "src")
    shutil.copytree(ROOT / "devcluster" / "omed_devcluster", source / "omed_devcluster")
    wheel = build_wheel(source, tmp_path / "wheels")
    assert dev_cluster_code(wheel) == []


def test_the_check_finds_dev_cluster_code_in_the_product(tmp_path: Path) -> None:
    """The layout before the dev cluster had a distribution of its own (omed.devcluster and
    omed.demo, the omed-devcluster script) fails the check."""
    source = copy_checkout(tmp_path / "src")
    shutil.copytree(ROOT / "devcluster" / "omed_devcluster", source / "omed" / "devcluster")
    shutil.move(source / "omed" / "devcluster" / "demo.py", source / "omed" / "demo.py")
    pyproject = source / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    script = 'omed = "omed.__main__:main"\n'
    assert script in text
    pyproject.write_text(
        text.replace(script, script + 'omed-devcluster = "omed.devcluster.__main__:main"\n'),
        encoding="utf-8",
    )
    found = dev_cluster_code(build_wheel(source, tmp_path / "wheels"))
    assert "omed/demo.py" in found
    assert "omed/devcluster/simulator.py" in found
    assert "omed/devcluster/sim/kubelet.py" in found
    assert "entry point omed-devcluster = omed.devcluster.__main__:main" in found


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def requirements(section: list[str]) -> dict[str, Requirement]:
    return {metadata_name(Requirement(r).name): Requirement(r) for r in section}


def metadata_name(name: str) -> str:
    return name.lower().replace("_", "-")


def test_the_licence_is_an_spdx_string_and_the_build_warns_of_nothing(tmp_path: Path) -> None:
    """``license = "Apache-2.0"`` (PEP 639) rather than a ``{text = ...}`` table, which
    setuptools >= 77 reports as deprecated on every ``pip install .``; the wheel's metadata
    carries it as a License-Expression."""
    assert pyproject()["license"] == "Apache-2.0"
    wheel = build_wheel(copy_checkout(tmp_path / "src"), tmp_path / "wheels")
    assert "License-Expression: Apache-2.0" in wheel.metadata.splitlines()
    assert "Warning" not in wheel.output, wheel.output
    assert "deprecated" not in wheel.output.lower(), wheel.output


def third_party_imports(package: Path) -> set[str]:
    """The top-level modules outside the standard library that a package's code imports."""
    found: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "omed"}


# pydantic-core is pydantic's own dependency, pinned by it to one exact version: omed.api
# imports it through pydantic's contract and declares pydantic.
THROUGH = {"pydantic-core": "pydantic"}


def test_runtime_dependencies_are_exactly_what_omed_imports() -> None:
    """Each runtime dependency is imported by omed/, and each third-party module omed/
    imports comes from a runtime dependency: cryptography (used by tests and the benchmarks
    only) sits in the dev extra, and anyio, which no code imports, is declared nowhere."""
    distributions = metadata.packages_distributions()
    imported = {
        THROUGH.get(d, d)
        for module in third_party_imports(ROOT / "omed")
        for d in map(metadata_name, distributions[module])
    }
    declared = set(requirements(pyproject()["dependencies"]))  # type: ignore[arg-type]
    assert imported == declared
    dev = requirements(pyproject()["optional-dependencies"]["dev"])  # type: ignore[index]
    assert "cryptography" in dev
    assert "anyio" not in declared | set(dev)


def test_the_bounds_hold_the_installed_versions() -> None:
    """The upper bounds (kubernetes-asyncio, whose config loaders' internals omed.kube reads;
    pydantic, whose core schemas omed.api.shapecheck walks; aiohttp) admit what is installed
    and tested, and each bounded dependency has one."""
    declared = requirements(pyproject()["dependencies"])  # type: ignore[arg-type]
    for name in ("kubernetes-asyncio", "pydantic", "aiohttp"):
        specifier = declared[name].specifier
        assert any(spec.operator == "<" for spec in specifier), name
        assert Version(metadata.version(name)) in specifier, (name, metadata.version(name))
