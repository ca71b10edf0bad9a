"""The ``kubectl-ome`` shell: flags, errors and exit codes (no cluster needed for these)."""

from __future__ import annotations

import io
import os
import socket
from pathlib import Path

import pytest
import yaml

from omed.cli.kubectl_ome import default_namespace, run


async def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def kubeconfig(tmp_path: Path, *, port: int, namespace: str | None = "prod") -> Path:
    context: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}},
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "main", "context": context},
            {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "staging"}},
        ],
        "current-context": "main",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["instance", "list"], "error: the following arguments are required: INFERENCESERVICE"),
        (
            ["instance", "list", "chat", "-o", "wide"],
            'error: unknown output format "wide" for instance list (use table, json, yaml; '
            "only instance status has a wide view)",
        ),
        (
            ["instance", "retry-blocks", "chat"],
            "error: the following arguments are required: --component",
        ),
        (
            ["instance", "retry-blocks", "chat", "--component", "prefill"],
            'error: invalid --component "prefill": must be one of engine, decoder, router',
        ),
        (
            ["instance", "list", "chat", "--request-timeout", "soon"],
            "error: argument --request-timeout: invalid --request-timeout 'soon': want "
            "seconds, such as 30 or 30s",
        ),
        (
            ["instance", "release-held", "chat", "--component", "engine"],
            "error: the following arguments are required: --revision",
        ),
        (
            ["instance", "release-held", "chat", "--component", "engine", "--revision", "x"],
            'error: invalid --revision "x": want the full revision, such as '
            "chat-engine-7f9c4d2b, or its hash, the last 8 characters, such as 7f9c4d2b",
        ),
        (
            [
                "instance",
                "release-held",
                "chat",
                "--component=engine",
                "--revision=chat-#4c6a152e",
            ],
            'error: invalid --revision "chat-#4c6a152e" (that is retry-blocks\' TARGET digest, '
            "not the revision's hash): want the full revision, such as chat-engine-7f9c4d2b, or "
            "its hash, the last 8 characters, such as 7f9c4d2b",
        ),
        (
            ["instance", "lsit", "chat"],
            'error: unknown subcommand "lsit" for "kubectl ome instance": lsit is not a '
            "subcommand (this build has list, retry-blocks, status and release-held)",
        ),
        (
            ["migration", "start", "chat"],
            'error: unknown command "migration" for "kubectl ome": this build has kubectl ome '
            "instance list, retry-blocks, status and release-held, and kubectl ome wait",
        ),
        (
            [],
            'error: unknown command "" for "kubectl ome": this build has kubectl ome instance '
            "list, retry-blocks, status and release-held, and kubectl ome wait",
        ),
        (
            ["wait", "chat", "--for=ready", "--component=engine"],
            'error: invalid --for "ready": want held-revision=unheld (or migration=terminal, '
            "once migrations are built)",
        ),
        (
            ["wait", "chat", "--for=migration=terminal", "--component=engine"],
            "error: --for=migration=terminal needs migrations, which this build doesn't have yet",
        ),
        (
            ["wait", "chat", "--for=held-revision=unheld", "--component=engine", "--timeout=5y"],
            "error: argument --timeout: invalid --timeout '5y': want a duration such as 60s, "
            "30m or 1h",
        ),
        (
            ["wait", "chat", "--for=held-revision=unheld", "--component=engine", "--revision=x"],
            'error: invalid --revision "x": want the full revision, such as '
            "chat-engine-7f9c4d2b, or its hash, the last 8 characters, such as 7f9c4d2b",
        ),
        (
            ["instance"],
            'error: "kubectl ome instance" needs a subcommand: list, retry-blocks, status or '
            "release-held",
        ),
        (
            ["instance", "status", "chat", "-1", "--component", "engine"],
            "error: argument INDEX: invalid INDEX '-1': want an Instance index such as 0 (IDX "
            "in instance list)",
        ),
        (
            ["instance", "status", "chat", "0"],
            "error: the following arguments are required: --component",
        ),
        (
            ["instance", "status", "chat", "0", "--component", "engine", "-o", "name"],
            'error: unknown output format "name" for instance status (use table, wide, json, '
            "yaml; only instance status has a wide view)",
        ),
    ],
)
async def test_a_bad_flag_is_one_error_line_and_exit_1(argv: list[str], message: str) -> None:
    code, out, err = await call(*argv)
    assert (code, out) == (1, "")
    assert err == message + "\n"


async def test_an_unreachable_server_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = kubeconfig(tmp_path, port=port)
    code, out, err = await call(
        "instance", "list", "chat", "--kubeconfig", str(config), "--request-timeout", "5s"
    )
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert f"127.0.0.1:{port}" in err


async def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    code, _, err = await call("instance", "list", "chat", "--kubeconfig", str(tmp_path / "no"))
    assert code == 1
    assert err.startswith("error: cannot load the kubeconfig: ") and str(tmp_path / "no") in err


def test_the_namespace_comes_from_the_context_as_kubectl_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = str(kubeconfig(tmp_path, port=1))
    monkeypatch.setenv("KUBECONFIG", f"{config}{os.pathsep}{tmp_path / 'other'}")
    assert default_namespace(None, None) == "prod"
    assert default_namespace(config, None) == "prod"
    assert default_namespace(config, "other") == "staging"
    bare = str(kubeconfig(tmp_path, port=1, namespace=None))
    assert default_namespace(bare, None) == "default"
    assert default_namespace(str(tmp_path / "missing"), None) == "default"
