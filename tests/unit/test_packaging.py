"""The product's wheel (what ``pip install .`` installs, and what the image is made of) holds
omed and nothing of the dev cluster: the control plane launcher, the node simulator, the
chart installer and the demo are the ``omed-devcluster`` distribution in ``devcluster/``."""

from __future__ import annotations

import shutil
from pathlib import Path

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
