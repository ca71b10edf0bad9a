"""``kubectl-ome``: the ``kubectl ome`` plugin (kubectl runs any ``kubectl-ome`` on the PATH).

Why: the product page "kubectl ome instance" defines the interface; this module is its entry
point: the flags, the reads and where each line goes. What the reports say is decided in
:mod:`omed.cli.instances`, without I/O.

Built so far: ``instance list`` and ``instance retry-blocks``, which only read. The rest of
the page (``instance status``, ``instance release-held``) and the ``migration``, ``wait`` and
``get`` commands are not built yet (docs/kubectl-ome.md).

Usage::

    kubectl ome instance list INFERENCESERVICE [-n NS] [-o table|json|yaml]
    kubectl ome instance retry-blocks INFERENCESERVICE --component COMPONENT [-n NS] [-o ...]

plus the kubeconfig flags ``--kubeconfig``, ``--context``, ``-n/--namespace`` and
``--request-timeout``.

Invariants (exit codes): 0 when a report was printed (whatever it says, as kubectl get
does: the EVIDENCE and ISSUE values carry the problems), except that a report whose
InferenceReplicas couldn't be listed at all (state ``UNAVAILABLE``) exits 1 after printing;
1 for every error, which prints ``error: <message>`` on stderr and nothing on stdout: a bad
flag, an InferenceService that can't be read, a kubeconfig that can't be used. Never a
traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any, Final, NoReturn, TextIO

import orjson
import yaml

from omed.api.constants import COMPONENTS
from omed.cli.instances import (
    UNAVAILABLE,
    collect,
    list_report,
    list_rows,
    render_table,
    retry_block_rows,
    retry_blocks,
    retry_blocks_report,
)
from omed.kube.client import KubeClient, load_config
from omed.kube.errors import ApiError
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES

__all__ = ["PROGRAM", "main", "run"]

PROGRAM: Final = "kubectl ome"
EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
DEFAULT_TIMEOUT: Final = 30.0
OUTPUTS: Final = ("table", "json", "yaml")


class UsageError(Exception):
    """A bad flag or argument: ``error: <message>`` and exit 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _timeout(text: str) -> float:
    """``--request-timeout``: seconds, or a Go-style ``30s``/``1m``; 0 means the default."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    number, scale = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1.0)
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid --request-timeout {text!r}: want seconds, such as 30 or 30s"
        ) from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"--request-timeout must be 0 or more, got {text}")
    return value or DEFAULT_TIMEOUT


def _kube_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("kubeconfig flags")
    group.add_argument("-n", "--namespace", help="the InferenceService's namespace")
    group.add_argument("--context", help="the kubeconfig context to use")
    group.add_argument("--kubeconfig", help="path to the kubeconfig file")
    group.add_argument(
        "--request-timeout",
        type=_timeout,
        default=DEFAULT_TIMEOUT,
        help="how long to wait for each API request (default 30s)",
    )


def _parser() -> _Parser:
    parser = _Parser(prog=PROGRAM, description="OME's kubectl plugin.", allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    instance = commands.add_parser(
        "instance",
        help="show the Instances of an InferenceService's OMENative components",
        allow_abbrev=False,
    )
    sub = instance.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", parser_class=_Parser)
    listing = sub.add_parser(
        "list", help="one row per Instance, from the InferenceReplicas' status"
    )
    blocks = sub.add_parser(
        "retry-blocks", help="the revisions OME is retrying or holding for one component"
    )
    for each in (listing, blocks):
        each.add_argument("inferenceservice", metavar="INFERENCESERVICE")
        each.add_argument("-o", "--output", default="table", help="table (default), json or yaml")
        _kube_flags(each)
    blocks.add_argument(
        "--component", required=True, help=f"the component: {', '.join(COMPONENTS)}"
    )
    return parser


BUILT: Final = ("list", "retry-blocks")
NOT_BUILT: Final = ("status", "release-held")


def _check_command(argv: Sequence[str]) -> None:
    """Name what isn't built before argparse's own wording (which varies by Python)."""
    words = [word for word in argv if not word.startswith("-")]
    if argv and argv[0] in ("-h", "--help"):
        return
    if not words or words[0] != "instance":
        command = words[0] if words else ""
        raise UsageError(
            f'unknown command "{command}" for "kubectl ome": this build has kubectl ome '
            "instance list and retry-blocks"
        )
    if len(words) > 1 and words[1] not in BUILT:
        built = " and ".join(BUILT)
        hint = "is not built yet" if words[1] in NOT_BUILT else "is not a subcommand"
        raise UsageError(
            f'unknown subcommand "{words[1]}" for "kubectl ome instance": {words[1]} {hint} '
            f"(this build has {built})"
        )


def _check(args: argparse.Namespace) -> None:
    if args.subcommand is None:
        raise UsageError('"kubectl ome instance" needs a subcommand: list or retry-blocks')
    if args.output not in OUTPUTS:
        raise UsageError(
            f'unknown output format "{args.output}" for instance {args.subcommand} '
            f"(use {', '.join(OUTPUTS)}; only instance status has a wide view)"
        )
    component = getattr(args, "component", None)
    if component is not None and component not in COMPONENTS:
        raise UsageError(
            f'invalid --component "{component}": must be one of {", ".join(COMPONENTS)}'
        )


def default_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The context's namespace, as kubectl takes it; ``default`` when it names none."""
    from kubernetes_asyncio import config as kconfig

    try:
        contexts, current = kconfig.list_kube_config_contexts(kubeconfig)
    except Exception:  # in-cluster, or a kubeconfig that load_config will report on
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


def _dump(report: dict[str, Any], output: str) -> str:
    if output == "json":
        return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(report, sort_keys=False, allow_unicode=True)


async def _read(
    client: KubeClient, namespace: str, name: str
) -> tuple[dict[str, Any], list[dict[str, Any]] | None, str | None]:
    try:
        isvc: dict[str, Any] = await client.get(INFERENCE_SERVICES, name, namespace)
    except ApiError as exc:
        raise CommandError(f'get InferenceService "{namespace}/{name}": {exc.message}') from None
    try:
        replicas = await client.list_all(INFERENCE_REPLICAS, namespace)
    except ApiError as exc:
        return isvc, None, exc.message
    return isvc, list(replicas), None


class CommandError(Exception):
    """An error after the flags parsed: ``error: <message>`` and exit 1."""


async def _execute(args: argparse.Namespace, *, out: TextIO, now: float) -> int:
    namespace = args.namespace or default_namespace(args.kubeconfig, args.context)
    try:
        config = await load_config(args.kubeconfig, context=args.context)
    except Exception as exc:
        raise CommandError(f"cannot load the kubeconfig: {exc}") from None
    async with KubeClient(
        config, qps=50.0, burst=100, user_agent="kubectl-ome", timeout=args.request_timeout
    ) as client:
        isvc, replicas, list_error = await _read(client, namespace, args.inferenceservice)
    collection = collect(isvc, replicas, list_error=list_error)
    if args.subcommand == "list":
        if args.output == "table":
            out.write(render_table(list_rows(collection)))
        else:
            out.write(_dump(list_report(collection), args.output))
    else:
        report = retry_blocks(collection, args.component, now=int(now))
        if args.output == "table":
            out.write(render_table(retry_block_rows(report, now=int(now))))
        else:
            out.write(_dump(retry_blocks_report(collection, report), args.output))
    return EXIT_ERROR if collection.state == UNAVAILABLE else EXIT_OK


async def run(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    now: float | None = None,
) -> int:
    """Run the plugin in-process; returns the exit code. ``now`` (epoch seconds) fixes the
    clock that retry-blocks judges times against."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser()
    try:
        _check_command(argv)
        args = parser.parse_args(list(argv))
        _check(args)
    except UsageError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_ERROR
    except SystemExit as exc:  # --help printed its text
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    try:
        return await _execute(args, out=out, now=time.time() if now is None else now)
    except CommandError as exc:
        err.write(f"error: {exc}\n")
    except Exception as exc:  # an unreachable server, a credential plugin that fails
        err.write(f"error: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: ``sys.exit(main())``."""
    return asyncio.run(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
