"""``kubectl-ome``: the ``kubectl ome`` plugin (kubectl runs any ``kubectl-ome`` on the PATH).

Why: the product page "kubectl ome instance" defines the interface; this module is its entry
point: the flags, the reads and where each line goes. What the reports say is decided in
:mod:`omed.cli.instances` and :mod:`omed.cli.instance_status`, without I/O.

Built so far: ``instance list``, ``instance retry-blocks`` and ``instance status``, which
only read. ``instance release-held`` and the ``migration``, ``wait`` and ``get`` commands are
not built yet (docs/kubectl-ome.md).

Usage::

    kubectl ome instance list INFERENCESERVICE [-n NS] [-o table|json|yaml]
    kubectl ome instance retry-blocks INFERENCESERVICE --component COMPONENT [-n NS] [-o ...]
    kubectl ome instance status INFERENCESERVICE INDEX --component COMPONENT [-o table|wide|...]

plus the kubeconfig flags ``--kubeconfig``, ``--context``, ``-n/--namespace`` and
``--request-timeout``.

Invariants (exit codes): 0 when a report was printed (whatever it says, as kubectl get
does: the EVIDENCE and ISSUE values carry the problems), except that a report whose
InferenceReplicas couldn't be listed at all (state ``UNAVAILABLE``, for status
``Unavailable``) exits 1 after printing;
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

from omed.api.constants import (
    COMPONENTS,
    KIND_CLUSTER_SERVING_RUNTIME,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
)
from omed.cli import instance_status
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
from omed.config.reconcile import ReconcileConfigError, deploy_entry
from omed.controllers.inferenceservice.project import resolve_mode
from omed.kube.client import KubeClient, Resource, load_config
from omed.kube.errors import ApiError, NotFound
from omed.kube.resources import (
    CLUSTER_SERVING_RUNTIMES,
    CONFIGMAPS,
    EVENTS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODS,
    SERVING_RUNTIMES,
)

__all__ = ["PROGRAM", "main", "run"]

PROGRAM: Final = "kubectl ome"
EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
DEFAULT_TIMEOUT: Final = 30.0
OUTPUTS: Final = ("table", "json", "yaml")
STATUS_OUTPUTS: Final = ("table", "wide", "json", "yaml")
CONFIG_NAME: Final = "inferenceservice-config"
DEFAULT_MANAGER_NAMESPACE: Final = "ome"


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


def _index(text: str) -> int:
    if not text.isdigit() or len(text) > 9:
        raise argparse.ArgumentTypeError(
            f"invalid INDEX {text!r}: want an Instance index such as 0 (IDX in instance list)"
        )
    return int(text)


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
    status = sub.add_parser(
        "status", help="one Instance: its recorded row, migrations, live pods and events"
    )
    for each in (listing, blocks, status):
        each.add_argument("inferenceservice", metavar="INFERENCESERVICE")
        if each is status:
            each.add_argument("index", metavar="INDEX", type=_index)
        each.add_argument(
            "-o",
            "--output",
            default="table",
            help="table (default), json or yaml" + (", or wide" if each is status else ""),
        )
        _kube_flags(each)
    for each in (blocks, status):
        each.add_argument(
            "--component", required=True, help=f"the component: {', '.join(COMPONENTS)}"
        )
    status.add_argument(
        "--manager-namespace",
        default=DEFAULT_MANAGER_NAMESPACE,
        help="where the manager's inferenceservice-config lives (default ome), read only when "
        "the deployment mode falls back to its deploy.defaultDeploymentMode",
    )
    return parser


BUILT: Final = ("list", "retry-blocks", "status")
NOT_BUILT: Final = ("release-held",)


def _check_command(argv: Sequence[str]) -> None:
    """Name what isn't built before argparse's own wording (which varies by Python)."""
    words = [word for word in argv if not word.startswith("-")]
    if argv and argv[0] in ("-h", "--help"):
        return
    if not words or words[0] != "instance":
        command = words[0] if words else ""
        raise UsageError(
            f'unknown command "{command}" for "kubectl ome": this build has kubectl ome '
            "instance list, retry-blocks and status"
        )
    if len(words) > 1 and words[1] not in BUILT:
        built = ", ".join(BUILT[:-1]) + " and " + BUILT[-1]
        hint = "is not built yet" if words[1] in NOT_BUILT else "is not a subcommand"
        raise UsageError(
            f'unknown subcommand "{words[1]}" for "kubectl ome instance": {words[1]} {hint} '
            f"(this build has {built})"
        )


def _check(args: argparse.Namespace) -> None:
    if args.subcommand is None:
        raise UsageError('"kubectl ome instance" needs a subcommand: list, retry-blocks or status')
    allowed = STATUS_OUTPUTS if args.subcommand == "status" else OUTPUTS
    if args.output not in allowed:
        raise UsageError(
            f'unknown output format "{args.output}" for instance {args.subcommand} '
            f"(use {', '.join(allowed)}; only instance status has a wide view)"
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
        if args.subcommand == "status":
            return await _status(client, args, collection, namespace=namespace, out=out)
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


async def _runtime(
    client: KubeClient, isvc: dict[str, Any], namespace: str
) -> tuple[dict[str, Any] | None, str, str | None]:
    """(runtime, origin, error) as the InferenceService controller finds the runtime: a
    ServingRuntime of the namespace, else (or for kind ClusterServingRuntime) the cluster's."""
    ref = (isvc.get("spec") or {}).get("runtime") or {}
    name = ref.get("name") if isinstance(ref, dict) else None
    if not name:
        return None, "NoRuntime", None
    lookups: list[tuple[Resource, str | None]] = []
    if ref.get("kind") != KIND_CLUSTER_SERVING_RUNTIME:
        lookups.append((SERVING_RUNTIMES, namespace))
    if not ref.get("kind") or ref.get("kind") == KIND_CLUSTER_SERVING_RUNTIME:
        lookups.append((CLUSTER_SERVING_RUNTIMES, None))
    for resource, where in lookups:
        try:
            found: dict[str, Any] = await client.get(resource, str(name), where)
        except NotFound:
            continue
        except ApiError as exc:
            return None, "RuntimeUnreadable", f"get {resource.kind} {name}: {exc.message}"
        return found, "LiveRuntime", None
    return None, "RuntimeNotFound", None


async def _status(
    client: KubeClient,
    args: argparse.Namespace,
    collection: Any,
    *,
    namespace: str,
    out: TextIO,
) -> int:
    errors: list[str] = []
    isvc = dict(collection.isvc)
    runtime, origin, runtime_error = await _runtime(client, isvc, namespace)
    if runtime_error:
        errors.append(runtime_error)
    default_mode: str | None = None
    default_known = True
    if resolve_mode(isvc, runtime, None)[1] == "Default":  # only the manager's entry is left
        try:
            config = await client.get(CONFIGMAPS, CONFIG_NAME, args.manager_namespace)
            default_mode = deploy_entry(config.get("data") or {}).default_deployment_mode
        except (ApiError, ReconcileConfigError) as exc:
            default_known = False
            reason = exc.message if isinstance(exc, ApiError) else str(exc)
            errors.append(f"read {args.manager_namespace}/{CONFIG_NAME}: {reason}")
    deploy = instance_status.deployment(
        isvc, runtime, origin=origin, default_mode=default_mode, default_known=default_known
    )
    name = args.inferenceservice
    selector = (
        f"{LABEL_INFERENCE_SERVICE}={name},{LABEL_COMPONENT}={args.component},"
        f"{LABEL_INSTANCE_INDEX}={args.index}"
    )
    pods: list[dict[str, Any]] | None = None
    events: list[dict[str, Any]] | None = None
    try:
        pods = await client.list_all(PODS, namespace, labelSelector=selector)
    except ApiError as exc:
        errors.append(f"list pods: {exc.message}")
    if pods:
        try:
            events = await client.list_all(
                EVENTS, namespace, fieldSelector="involvedObject.kind=Pod,type=Warning"
            )
        except ApiError as exc:
            errors.append(f"list events: {exc.message}")
    report = instance_status.build(
        collection,
        component=args.component,
        index=args.index,
        deploy=deploy,
        pods=pods,
        events=events,
        read_errors=errors,
    )
    if args.output in ("table", "wide"):
        rows = instance_status.table_rows(report, wide=args.output == "wide")
        out.write(render_table(rows))
    else:
        out.write(_dump(report.report, args.output))
    return EXIT_ERROR if report.state == instance_status.UNAVAILABLE_STATE else EXIT_OK


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
