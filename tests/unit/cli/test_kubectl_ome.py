"""The ``kubectl-ome`` shell: flags, help, errors and exit codes, durations, output shapes,
what it imports (no cluster needed for these)."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from omed.api.constants import COMPONENTS
from omed.cli import kubectl_ome, kubectl_ome_instance, release_held
from omed.cli.kubectl_ome import COMMANDS, Command, run
from omed.cli.kubectl_ome_instance import default_namespace
from omed.version import VERSION


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
            'error: unknown output format "wide" for instance list (use table, name, json, '
            "yaml; only instance status has a wide view)",
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
            "error: Invalid timeout value. Timeout must be a single integer in seconds, or an "
            "integer followed by a corresponding time unit (e.g. 1s | 2m | 3h)",
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
            "subcommand (this build has list, retry-blocks, status, release-held and plan)",
        ),
        (["migration", "start", "chat"], "error: component is required"),
        (
            ["migration", "start", "chat", "--component=engine", "--instance=03"],
            "error: instance must be a canonical integer from 0 through 2147483647",
        ),
        (
            ["migration", "start", "chat", "--component=engine", "--instance=3", "--bogus"],
            "error: invalid migration action flags; use --help",
        ),
        (
            ["migration", "start", "chat", "--component=engine", "--instance=3", "-o", "name"],
            "error: output must be table, wide, json or yaml",
        ),
        (
            ["migration", "strat", "chat"],
            'error: unknown subcommand "strat" for "kubectl ome migration": strat is not a '
            "subcommand (this build has start, status, history and drain-node)",
        ),
        (
            ["migration", "history", "chat", "-o", "name"],
            'error: unsupported output format "name" (supported: table, wide, json, yaml)',
        ),
        (
            ["migration", "history", "chat", "--component=engin"],
            'error: invalid --component "engin": must be one of engine, decoder, router',
        ),
        (
            ["wait", "chat", "--for=ready", "--component=engine"],
            'error: invalid --for "ready": want held-revision=unheld or migration=terminal',
        ),
        (
            ["wait", "chat", "--for=migration=terminal", "--component=engine"],
            "error: --component is not a flag of --for=migration=terminal",
        ),
        (
            ["wait", "chat", "--for=migration=terminal"],
            "error: --for=migration=terminal needs --request-id",
        ),
        (
            ["wait", "chat", "--for=migration=terminal", "--request-id=7c9e6679"],
            'error: invalid --request-id "7c9e6679": want the request-id migration start '
            "printed, a UUID such as 7c9e6679-7425-40de-944b-e07fc1f90ae7",
        ),
        (
            ["wait", "chat", "--for=held-revision=unheld"],
            "error: --for=held-revision=unheld needs --component",
        ),
        (
            [
                "wait",
                "chat",
                "--for=held-revision=unheld",
                "--component=engine",
                "--request-id=7c9e6679-7425-40de-944b-e07fc1f90ae7",
            ],
            "error: --request-id is not a flag of --for=held-revision=unheld",
        ),
        (
            ["wait", "chat", "--for=held-revision=unheld", "--component=engine", "--timeout=5y"],
            'error: invalid argument "5y" for "--timeout" flag: time: unknown unit "y" in '
            'duration "5y"',
        ),
        (
            ["wait", "chat", "--for=held-revision=unheld", "--component=engine", "--timeout=30"],
            'error: invalid argument "30" for "--timeout" flag: time: missing unit in '
            'duration "30"',
        ),
        (
            ["wait", "chat", "--for=held-revision=unheld", "--component=engine", "--timeout=-1s"],
            'error: invalid argument "-1s" for "--timeout" flag: must be 0 or more',
        ),
        (
            ["instance", "list", "chat", "--request-timeout=-1s"],
            'error: invalid argument "-1s" for "--request-timeout" flag: must be 0 or more',
        ),
        (
            ["instance", "list", "chat", "-o", "wide", "--no-headers"],
            'error: unknown output format "wide" for instance list (use table, name, json, '
            "yaml; only instance status has a wide view)",
        ),
        (
            ["instance", "status", "chat", "0", "--component=engine", "--no-headers"],
            "error: unrecognized arguments: --no-headers",
        ),
        (
            ["completion", "fish"],
            "error: argument SHELL: invalid choice: 'fish' (choose from 'bash', 'zsh')",
        ),
        (
            ["wait", "chat", "--for=held-revision=unheld", "--component=engine", "--revision=x"],
            'error: invalid --revision "x": want the full revision, such as '
            "chat-engine-7f9c4d2b, or its hash, the last 8 characters, such as 7f9c4d2b",
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


# -- help, version -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        ([], "usage: kubectl ome [-h] [--version] COMMAND ..."),
        (["--help"], "usage: kubectl ome [-h] [--version] COMMAND ..."),
        (["help"], "usage: kubectl ome [-h] [--version] COMMAND ..."),
        (["instance"], "usage: kubectl ome instance [-h] SUBCOMMAND ..."),
        (["help", "instance"], "usage: kubectl ome instance [-h] SUBCOMMAND ..."),
    ],
)
async def test_bare_commands_print_their_help_and_exit_0(argv: list[str], usage: str) -> None:
    code, out, err = await call(*argv)
    assert (code, err) == (0, "")
    assert out.startswith(usage)
    assert "examples:\n" in out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c.words))
async def test_every_command_has_help_with_examples(command: Command) -> None:
    code, out, err = await call(*command.words, "--help")
    assert (code, err) == (0, "")
    assert out.startswith(f"usage: kubectl ome {' '.join(command.words)} ")
    examples = out.split("examples:\n", 1)[1]
    # Every example line is a command line of this very command (or a comment).
    lines = [line.strip() for line in examples.splitlines() if line.strip()]
    runs = [line for line in lines if line.startswith("kubectl ome ") or line.startswith("source")]
    assert runs, examples
    assert all(
        line.startswith(("#", "kubectl ome", "source", "--", "-n")) or line.endswith("\\")
        for line in lines
    ), examples
    # The examples keep their lines (RawDescriptionHelpFormatter), and "help COMMAND" says the same.
    assert command.examples.split("\n", 1)[1] in out
    assert await call("help", *command.words) == (0, out, "")


async def test_the_help_names_migration_history() -> None:
    out = io.StringIO()
    assert await run(["--help"], out=out) == 0
    assert "status and\n              history" in out.getvalue()
    out = io.StringIO()
    assert await run(["migration", "--help"], out=out) == 0
    assert "    history   the migrations of an InferenceService" in out.getvalue()


async def test_help_after_flags_is_still_the_commands_help() -> None:
    code, out, _ = await call("instance", "list", "chat", "-o", "json", "-h")
    assert code == 0 and out.startswith("usage: kubectl ome instance list ")


async def test_version_prints_omeds_one_version() -> None:
    assert await call("version") == (0, f"kubectl-ome {VERSION}\n", "")
    assert await call("--version") == (0, f"kubectl-ome {VERSION}\n", "")


def test_the_plugins_spelled_constants_are_the_sources_ones() -> None:
    assert kubectl_ome.COMPONENTS == COMPONENTS
    assert kubectl_ome.DRY_RUN_MODES == release_held.DRY_RUN_MODES


# -- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 30.0),  # kubectl's whole seconds
        ("+5", 5.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        ("1µs", 1e-6),
        ("0", kubectl_ome.DEFAULT_TIMEOUT),
        ("0s", kubectl_ome.DEFAULT_TIMEOUT),
        ("", kubectl_ome.DEFAULT_TIMEOUT),
    ],
)
def test_request_timeout_reads_as_kubectl_reads_it(text: str, seconds: float) -> None:
    assert kubectl_ome._request_timeout(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "1.5", "5y", "1m30", "-5", "9223372036854775808", "1e3s"])
def test_a_request_timeout_kubectl_refuses_gets_kubectls_error(text: str) -> None:
    with pytest.raises(kubectl_ome.UsageError) as caught:
        kubectl_ome._request_timeout(text)
    assert str(caught.value) == kubectl_ome.INVALID_TIMEOUT


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("0", 0.0),
        ("90s", 90.0),
        ("1m30s", 90.0),
        ("250ms", 0.25),
        ("1h", 3600.0),
        ("30", 'time: missing unit in duration "30"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("", 'time: invalid duration ""'),
        ("1..5s", 'time: missing unit in duration "1..5s"'),
        (".s", 'time: invalid duration ".s"'),
        ("\u00e9s", 'time: invalid duration "\\xc3\\xa9s"'),
    ],
)
def test_wait_timeout_is_a_go_duration_with_kubectls_error(text: str, outcome: object) -> None:
    """kubectl wait's --timeout is a pflag Duration: Go's ParseDuration, and its error in
    ``invalid argument "X" for "--timeout" flag: <Go's message>``."""
    if isinstance(outcome, float):
        assert kubectl_ome._wait_timeout(text) == pytest.approx(outcome)
        return
    with pytest.raises(kubectl_ome.UsageError) as caught:
        kubectl_ome._wait_timeout(text)
    assert str(caught.value) == f'invalid argument "{text}" for "--timeout" flag: {outcome}'


# -- output ------------------------------------------------------------------------------------


def test_yaml_output_never_folds_a_long_value() -> None:
    message = "word " * 60 + "end"
    text = kubectl_ome_instance.dump({"kind": "InstanceListReport", "message": message}, "yaml")
    assert text == f"kind: InstanceListReport\nmessage: {message}\n"
    assert yaml.safe_load(text)["message"] == message


def test_no_headers_drops_the_header_and_pads_the_rows_to_their_own_widths() -> None:
    rows = [["COMPONENT", "IDX"], ["engine", "0"], ["router", "12"]]
    assert kubectl_ome_instance._table(rows, no_headers=False) == (
        "COMPONENT   IDX\nengine      0\nrouter      12\n"
    )
    assert kubectl_ome_instance._table(rows, no_headers=True) == "engine   0\nrouter   12\n"


# -- imports -----------------------------------------------------------------------------------


def test_help_imports_nothing_of_the_manager_or_its_libraries() -> None:
    """``kubectl ome --help`` answers from the standard library alone: the API models, the
    HTTP client and the event loop are imported only by the command that runs."""
    script = (
        "import sys\n"
        "from omed.cli import kubectl_ome\n"
        "code = kubectl_ome.main(['--help'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('asyncio', 'aiohttp', 'pydantic', 'kubernetes_asyncio', 'yaml', 'orjson', 'argcomplete')"
        " or (m.startswith('omed.') and m not in ('omed.cli', 'omed.cli.kubectl_ome')))\n"
        "print(code, heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "0 []"


def test_instance_list_imports_none_of_status_or_the_manager() -> None:
    script = (
        "import sys\n"
        "import omed.cli.kubectl_ome_instance\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic' or m.startswith("
        "('omed.controllers', 'omed.webhooks', 'omed.manager', 'omed.config.', 'omed.informers',"
        " 'omed.cli.instance_status', 'omed.cli.kubectl_ome_status'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_api_and_config_packages_still_export_every_name() -> None:
    import omed.api
    import omed.config

    for package in (omed.api, omed.config):
        for name in package.__all__:
            assert getattr(package, name) is not None, name
        with pytest.raises(AttributeError):
            package.no_such_name  # noqa: B018


# -- completion --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ([], ["instance", "migration", "get", "wait", "version", "completion", "help", ":4"]),
        (["instance", "st"], ["status", ":4"]),
        (["instance", "list", "chat", "--no"], ["--no-headers", ":4"]),
        (["instance", "list", "chat", "--output", "y"], ["yaml", ":4"]),
        (["instance", "release-held", "chat", "--dry-run", ""], ["none", "client", "server", ":4"]),
        (["instance", "retry-blocks", "chat", "--component", "r"], ["router", ":4"]),
        (["completion", ""], ["bash", "zsh", ":4"]),
        (["instance", "list", ""], [":4"]),  # an InferenceService's name: nothing to offer
    ],
)
def test_kubectls_completion_hook_offers_commands_flags_and_values(
    words: list[str], expected: list[str]
) -> None:
    before = dict(os.environ)
    lines = kubectl_ome.complete(words)
    assert [line.split("\t", 1)[0] for line in lines] == expected
    assert dict(os.environ) == before  # the finder's variables are gone again


def test_completion_candidates_carry_their_help_as_cobra_descriptions() -> None:
    lines = kubectl_ome.complete(["instance", ""])
    assert "list\tone row per Instance, from the InferenceReplicas' status" in lines


@pytest.mark.parametrize("shell", ["bash", "zsh"])
async def test_completion_prints_a_script_for_kubectl_ome(shell: str) -> None:
    code, out, err = await call("completion", shell)
    assert (code, err) == (0, "")
    assert "_python_argcomplete" in out
    assert "complete -o nospace -o default -o bashdefault -F _python_argcomplete kubectl-ome" in out
    assert "compdef _python_argcomplete kubectl-ome" in out  # zsh registers the same function


def test_component_replica_says_what_could_not_be_done_and_why() -> None:
    """``instance plan`` and ``wait --for=held-revision`` refuse alike: the collection's first
    issue, else that no InferenceReplica runs the component; a replica read is handed back
    with its object."""
    import argparse

    from omed.cli.instances import Collection, Component, collect
    from omed.cli.kubectl_ome import CommandError

    args = argparse.Namespace(component="engine", inferenceservice="llm")
    isvc = {"metadata": {"name": "llm", "namespace": "prod"}}
    unlisted = collect(isvc, None, list_error="forbidden")
    with pytest.raises(CommandError, match=r"^cannot plan the engine: cannot list .*forbidden"):
        kubectl_ome_instance.component_replica(
            unlisted, args, namespace="prod", cannot="cannot plan the engine"
        )
    empty = Collection(isvc=isvc, components={}, issues=[], listed=True)
    with pytest.raises(CommandError) as caught:
        kubectl_ome_instance.component_replica(
            empty, args, namespace="prod", cannot="cannot wait for held-revision=unheld"
        )
    assert str(caught.value) == (
        "cannot wait for held-revision=unheld: no InferenceReplica of InferenceService "
        "prod/llm runs the engine"
    )
    source = {"metadata": {"name": "llm-engine"}}
    read = Component("engine", "llm-engine", "OK", source=source)
    found = Collection(isvc=isvc, components={"engine": read}, issues=[], listed=True)
    assert kubectl_ome_instance.component_replica(found, args, namespace="prod", cannot="x") == (
        read,
        source,
    )


async def test_a_wait_ends_unmet_before_a_read_that_would_come_after_its_timeout() -> None:
    """Both ``kubectl ome wait`` predicates time their reads alike: the next read is skipped,
    and the wait ends with exit 2, when it would land past ``--timeout``."""
    import argparse

    from omed.cli.kubectl_ome import EXIT_UNMET, CommandError, Streams

    clock = [100.0]
    streams = Streams(
        out=io.StringIO(),
        err=io.StringIO(),
        stdin=io.StringIO(),
        now=lambda: 0.0,
        monotonic=lambda: clock[0],
    )
    args = argparse.Namespace(timeout=10.0)
    await kubectl_ome_instance._next_read(
        streams, args, started=91.0, every=0.0, waiting_for="held-revision=unheld on x"
    )
    with pytest.raises(CommandError) as caught:
        await kubectl_ome_instance._next_read(
            streams,
            args,
            started=91.0,
            every=1.5,
            waiting_for="migration=u=terminal on y",
            detail=" (phase Draining)",
        )
    assert caught.value.exit_code == EXIT_UNMET
    assert str(caught.value) == (
        "timed out waiting for migration=u=terminal on y after 10s (phase Draining)"
    )
