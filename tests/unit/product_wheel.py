"""Build omed's wheel the way ``pip install .`` and the image build it, offline, and say which
of its members are dev cluster code.

The dev cluster (``devcluster/``, import package ``omed_devcluster``: the control plane
launcher, the node simulator, the chart installer and the demo) is a distribution of its
own; the product's wheel and image carry only what runs in a cluster. The wheel is built
from a copy of the sources, never in the checkout: setuptools reuses ``build/lib`` and would
package whatever an earlier build left there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

NOT_SOURCES = {
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    ".import_linter_cache",
}
"""What a checkout holds besides its sources: tools' caches and earlier builds."""


def copy_checkout(dest: Path) -> Path:
    """The checkout as ``pip install .`` sees it (every file but caches and old builds)."""
    shutil.copytree(
        ROOT,
        dest,
        ignore=lambda _dir, names: [
            n for n in names if n in NOT_SOURCES or n.endswith((".egg-info", ".pyc"))
        ],
        symlinks=True,
    )
    return dest


@dataclass(frozen=True)
class Wheel:
    name: str
    members: list[str]
    entry_points: str
    metadata: str
    """The wheel's METADATA (the core metadata pip installs)."""
    output: str
    """What the build printed (pip's and the build backend's output)."""


def build_wheel(source: Path, out: Path) -> Wheel:
    """Build the wheel of the project in ``source`` with pip, offline (no index, no build
    isolation: the build backend comes with the dev extras)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--no-cache-dir",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as archive:
        members = archive.namelist()
        entry_points = [m for m in members if m.endswith(".dist-info/entry_points.txt")]
        text = archive.read(entry_points[0]).decode() if entry_points else ""
        metadata = [m for m in members if m.endswith(".dist-info/METADATA")]
        core = archive.read(metadata[0]).decode() if metadata else ""
    return Wheel(
        name=wheels[0].name,
        members=members,
        entry_points=text,
        metadata=core,
        output=result.stdout + result.stderr,
    )


def dev_cluster_code(wheel: Wheel) -> list[str]:
    """What in a product wheel is dev cluster code or starts it: a member outside ``omed/``
    and the wheel's metadata, a module named after the dev cluster or the demo, a console
    script into either."""

    def foreign(name: str) -> bool:
        top = name.split("/", 1)[0]
        return top != "omed" and not top.endswith((".dist-info", ".data"))

    found = [
        name
        for name in wheel.members
        if foreign(name) or "devcluster" in name or name == "omed/demo.py"
    ]
    found += [
        f"entry point {line.strip()}"
        for line in wheel.entry_points.splitlines()
        if "devcluster" in line or "demo" in line
    ]
    return found
