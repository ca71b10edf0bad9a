"""``omed --help`` is Go's usage layout byte for byte: golden_help.txt holds the text.

The golden file is the help of an environment without ``POD_NAMESPACE`` and ``KUBECONFIG``
(the two flags whose defaults come from it). A change to a flag's usage, type or default
shows up here as a diff; the file is regenerated, from the repository root, with
``env -u POD_NAMESPACE -u KUBECONFIG .venv/bin/python -m omed --help``
``> tests/unit/config/golden_help.txt``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from omed.__main__ import main
from omed.config.flags import HelpRequested, parse_flags, usage

GOLDEN = (Path(__file__).parent / "golden_help.txt").read_bytes()


def test_usage_is_the_golden_text() -> None:
    assert usage({}).encode() == GOLDEN


@pytest.mark.parametrize("arg", ["-h", "--help", "-help", "--h"])
def test_help_flags_print_the_golden_text(
    arg: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert main([arg]) == 0
    out, err = capsys.readouterr()
    assert out.encode() == GOLDEN
    assert err == ""


def test_help_request_carries_the_golden_text() -> None:
    with pytest.raises(HelpRequested) as caught:
        parse_flags(["-h"], {})
    assert caught.value.message.encode() == GOLDEN


def test_python_dash_m_omed_help_is_the_golden_bytes() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("POD_NAMESPACE", "KUBECONFIG")}
    done = subprocess.run(
        [sys.executable, "-m", "omed", "--help"],
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == GOLDEN
    assert done.stderr == b""
