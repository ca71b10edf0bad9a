"""``kubectl ome`` as a user's shell meets it, through the real kubectl: bare ``kubectl ome``,
``version``, kubectl's plugin completion (``kubectl __complete ome ...`` runs the
``kubectl_complete-ome`` installed beside the plugin) and the bash completion script.

None of these reads a cluster, so no control plane is started: kubectl is the dev cluster's
own binary, and the plugin and its completion command are the virtualenv's console
scripts, put on the PATH as a user's installation puts them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omed.version import VERSION
from omed_devcluster.binaries import ensure_binaries

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def kubectl() -> str:
    return str(ensure_binaries().kubectl)


def env() -> dict[str, str]:
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), env=env(), capture_output=True, text=True, timeout=60, check=False
    )


def test_bare_kubectl_ome_prints_help_and_exits_0(kubectl: str) -> None:
    done = run(kubectl, "ome")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.startswith("usage: kubectl ome [-h] [--version] COMMAND ...")
    for command in ("instance", "wait", "version", "completion"):
        assert f"\n    {command}" in done.stdout


def test_kubectl_ome_version_is_omeds_version(kubectl: str) -> None:
    """``kubectl ome version`` and ``omed --version`` print one version, the one the
    ``omed_build_info`` metric carries (tests/unit/test_metrics.py): all read
    :data:`omed.version.VERSION`, the installed distribution's metadata."""
    done = run(kubectl, "ome", "version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"kubectl-ome {VERSION}\n", "")
    manager = run(str(BIN / "omed"), "--version")
    assert (manager.returncode, manager.stdout.strip()) == (0, VERSION), manager.stderr
    from importlib import metadata

    assert metadata.version("omed") == VERSION


def complete(kubectl: str, *words: str) -> tuple[list[str], str]:
    """``kubectl __complete ome WORDS...``: the candidates' values and the directive line."""
    done = run(kubectl, "__complete", "ome", *words)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and lines[-1].startswith(":"), done.stdout
    return [line.split("\t", 1)[0] for line in lines[:-1]], lines[-1]


def test_kubectl_completes_the_plugins_commands_and_flag_values(kubectl: str) -> None:
    assert shutil.which("kubectl_complete-ome", path=env()["PATH"]) == str(
        BIN / "kubectl_complete-ome"
    )
    assert complete(kubectl, "") == (
        ["instance", "migration", "get", "wait", "version", "completion", "help"],
        ":4",
    )
    assert complete(kubectl, "instance", "") == (
        ["list", "retry-blocks", "status", "release-held", "plan"],
        ":4",
    )
    assert complete(kubectl, "instance", "re") == (["retry-blocks", "release-held"], ":4")
    assert complete(kubectl, "instance", "list", "chat", "-o", "") == (
        ["table", "name", "json", "yaml"],
        ":4",
    )
    values, _ = complete(kubectl, "instance", "status", "chat", "0", "--comp")
    assert values == ["--component"]
    assert complete(kubectl, "instance", "status", "chat", "0", "--component=d") == (
        ["--component=decoder"],
        ":4",
    )
    assert complete(kubectl, "wait", "chat", "--for", "") == (
        ["held-revision=unheld", "migration=terminal"],
        ":4",
    )
    # A path is the shell's to complete: cobra's default directive.
    assert complete(kubectl, "instance", "list", "chat", "--kubeconfig", "/nonexistent-") == (
        [],
        ":0",
    )


def test_the_bash_completion_script_loads_and_completes(kubectl: str) -> None:
    script = run(kubectl, "ome", "completion", "bash")
    assert script.returncode == 0, script.stderr
    # Load the script as a user's shell would, then call the function bash calls on TAB.
    shell = (
        f"source <({kubectl} ome completion bash) && complete -p kubectl-ome && "
        'COMP_LINE="kubectl-ome instance li" COMP_POINT=23 COMP_WORDS=(kubectl-ome instance li) '
        "COMP_CWORD=2 && _python_argcomplete kubectl-ome && "
        'printf "reply:%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", shell], env=env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("complete ") and lines[0].endswith(" kubectl-ome")
    assert "-F _python_argcomplete" in lines[0]
    # One match: completed, with the space that ends the word.
    assert [line for line in lines if line.startswith("reply:")] == ["reply:list "]
