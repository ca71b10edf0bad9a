"""``omed.__main__.main``: the exit codes and lines of the checks that need no cluster."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from omed.__main__ import main
from omed.version import VERSION


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    """main() installs its own log handler on the root logger; put pytest's back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_help_prints_the_usage_to_stdout_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Usage of omed:\n")
    assert "  -leader-elect-lease-duration duration\n" in out
    assert err == ""


@pytest.mark.parametrize("argv", [["--version"], ["-version"], ["--webhook", "--version"]])
def test_version_prints_the_one_version_to_stdout_and_exits_0(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``omed --version`` prints omed.version.VERSION, the installed distribution's version
    (what ``kubectl ome version`` and the build-info metric read too), and nothing else."""
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == f"{VERSION}\n"
    assert metadata.version("omed") == VERSION
    assert err == ""


def test_version_takes_no_value(capsys: pytest.CaptureFixture[str]) -> None:
    """``--version`` isn't one of OME's flags, so it has no Go boolean form to mimic."""
    assert main(["--version=true"]) == 2
    assert capsys.readouterr().err.startswith("flag provided but not defined: -version\n")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--bogus"], "flag provided but not defined: -bogus"),
        (["--leader-elect=yes"], 'invalid boolean value "yes" for -leader-elect: parse error'),
        (["--webhook-port", "x"], 'invalid value "x" for flag -webhook-port: parse error'),
        (["--webhook-port"], "flag needs an argument: -webhook-port"),
    ],
)
def test_bad_flags_print_go_s_line_and_the_usage_to_stderr_and_exit_2(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(line + "\nUsage of omed:\n")


def test_invalid_leader_election_timing_logs_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--leader-elect-renew-deadline=12s", "--leader-elect-retry-period=10s"])
    assert code == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    fields = lines[0].split("\t")
    assert fields[1:] == [
        "ERROR",
        "setup",
        "Invalid leader election timing",
        '{"error":"--leader-elect-renew-deadline=12s must be greater than 1.2 x '
        '--leader-elect-retry-period=10s (12s)"}',
    ]


def test_the_timing_check_runs_without_leader_election_and_logs_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--zap-encoder=json", "--leader-elect-lease-duration=10s"])
    assert code == 1
    err = capsys.readouterr().err
    assert '"msg":"Invalid leader election timing"' in err
    assert (
        '"error":"--leader-elect-lease-duration=10s must be greater than '
        '--leader-elect-renew-deadline=10s"' in err
    )


def test_a_missing_kubeconfig_logs_unable_to_get_kubeconfig_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "kubeconfig"
    assert main([f"--kubeconfig={missing}"]) == 1
    err = capsys.readouterr().err
    failure = [line for line in err.splitlines() if "\tunable to get kubeconfig\t" in line]
    assert len(failure) == 1, err
    assert "ERROR\tsetup" in failure[0]
    assert str(missing) in failure[0]


def test_an_unusable_https_proxy_stops_the_manager_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Go would ignore the address and connect directly; omed refuses to bypass the proxy.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://10.96.0.1:443'}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    monkeypatch.setenv("HTTPS_PROXY", "socks5://proxy.example.com:1080")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert main([f"--kubeconfig={kubeconfig}"]) == 1
    err = capsys.readouterr().err
    failure = [line for line in err.splitlines() if "\tunable to get kubeconfig\t" in line]
    assert len(failure) == 1, err
    assert (
        "HTTPS_PROXY 'socks5://proxy.example.com:1080': the socks5 scheme is not supported"
        in failure[0]
    )
