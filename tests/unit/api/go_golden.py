"""Run a golden Go program (tests/golden/<name>/main.go) on its checked-in cases.

Why: a golden value is only independent of omed if something other than omed's code made it;
the Go programs do, with Go's own ``encoding/json``. Where Go is installed the tests rerun the
program and compare its output with the checked-in one, so the two can't drift apart.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

GO = shutil.which("go") or (
    "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
)
"""The Go toolchain, if this machine has one."""

needs_go = pytest.mark.skipif(
    GO is None, reason="Go is not installed: the checked-in output is compared"
)


def go_output(directory: Path) -> Any:
    """The JSON the program in ``directory`` prints for its ``cases.json``, offline."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    assert GO is not None
    run = subprocess.run(
        [GO, "run", "."],
        cwd=directory,
        input=(directory / "cases.json").read_bytes(),
        capture_output=True,
        env=env,
        timeout=600,
        check=False,
    )
    if run.returncode != 0 and b"module lookup disabled" in run.stderr:
        pytest.skip("the Go module cache lacks k8s.io/api v0.36.3")
    assert run.returncode == 0, run.stderr.decode()
    return json.loads(run.stdout)
