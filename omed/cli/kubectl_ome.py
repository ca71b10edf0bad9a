"""``kubectl-ome``: the ``kubectl ome`` plugin (kubectl runs any ``kubectl-ome`` on the PATH).

Why: the plugin's flags, output and exit codes are an interface users script against; this
module is its entry point: the flags, the reads and where each line goes. What the reports
say is decided in :mod:`omed.cli.instances` and :mod:`omed.cli.instance_status`, without I/O.

Built so far: the four ``instance`` subcommands: ``list``, ``retry-blocks`` and
``status``, which only read, and the guarded ``release-held``; and ``wait
--for=held-revision=unheld``. The ``migration`` and ``get`` commands, and waiting for a
migration, are not built yet (docs/kubectl-ome.md).

Usage::

    kubectl ome instance list INFERENCESERVICE [-n NS] [-o table|json|yaml]
    kubectl ome instance retry-blocks INFERENCESERVICE --component COMPONENT [-n NS] [-o ...]
    kubectl ome instance status INFERENCESERVICE INDEX --component COMPONENT [-o table|wide|...]
    kubectl ome instance release-held INFERENCESERVICE --component COMPONENT --revision REV
        [--dry-run none|client|server] [--yes] [-o ...]
    kubectl ome wait INFERENCESERVICE --for=held-revision=unheld --component COMPONENT
        [--revision REV] [--timeout 60s]

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
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn, TextIO, TypeVar

import orjson
import yaml

from omed.api.constants import (
    COMPONENTS,
    KIND_CLUSTER_SERVING_RUNTIME,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
)
from omed.cli import instance_status, release_held
from omed.cli.instances import (
    UNAVAILABLE,
    Collection,
    collect,
    list_report,
    list_rows,
    render_table,
    retry_block_rows,
    retry_blocks,
    retry_blocks_report,
)
from omed.config.reconcile import ReconcileConfigError, deploy_entry
from omed.controllers.inferenceservice.core.project import resolve_mode_json as resolve_mode
from omed.kube.client import KubeClient, Resource, load_config
from omed.kube.errors import ApiError, Conflict, NotFound
from omed.kube.resources import (
    CLUSTER_SERVING_RUNTIMES,
    CONFIGMAPS,
    EVENTS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODS,
    SERVING_RUNTIMES,
)

__all__ = ["PROGRAM", "main", "out_of_time", "read_line", "run"]

T = TypeVar("T")

_REVISION_ARG: Final = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?-)?[0-9a-f]{8}")

PROGRAM: Final = "kubectl ome"
EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
DEFAULT_TIMEOUT: Final = 30.0
OUTPUTS: Final = ("table", "json", "yaml")
STATUS_OUTPUTS: Final = ("table", "wide", "json", "yaml")
CONFIG_NAME: Final = "inferenceservice-config"
DEFAULT_MANAGER_NAMESPACE: Final = "ome"
DEFAULT_WAIT: Final = 60.0
"""Without --timeout, kubectl ome wait stops after 60 seconds."""
WAIT_POLL: Final = 1.0
WAIT_CONDITIONS: Final = ("held-revision=unheld", "migration=terminal")


class UsageError(Exception):
    """A bad flag or argument: ``error: <message>`` and exit 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(text: str, *, flag: str, want: str) -> float:
    """Seconds, or a Go-style duration (``30s``, ``30m``, ``1h``); 0 or more."""
    unit = _UNITS.get(text[-1:])
    number, scale = (text[:-1], unit) if unit is not None else (text, 1.0)
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {flag} {text!r}: want {want}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{flag} must be 0 or more, got {text}")
    return value


def _timeout(text: str) -> float:
    """``--request-timeout``; 0 means the default."""
    value = _seconds(text, flag="--request-timeout", want="seconds, such as 30 or 30s")
    return value or DEFAULT_TIMEOUT


def _duration(text: str) -> float:
    """``wait --timeout``; 0 checks once."""
    return _seconds(text, flag="--timeout", want="a duration such as 60s, 30m or 1h")


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
    release = sub.add_parser(
        "release-held", help="ask OME to try a Held revision again (alpha; a guarded action)"
    )
    release.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    release.add_argument(
        "--revision",
        required=True,
        help="the block's full target revision (chat-engine-7f9c4d2b) or its hash (7f9c4d2b)",
    )
    release.add_argument(
        "--dry-run",
        default="none",
        choices=release_held.DRY_RUN_MODES,
        help="client: check everything, send nothing; server: the API server checks the patch "
        "without storing it; none (default): release",
    )
    release.add_argument("--yes", action="store_true", help="skip the prompt (never a check)")
    release.add_argument(
        "-o", "--output", default="table", help="table (default; wide is table), json or yaml"
    )
    _kube_flags(release)
    for each in (blocks, status, release):
        each.add_argument(
            "--component", required=True, help=f"the component: {', '.join(COMPONENTS)}"
        )
    wait = commands.add_parser(
        "wait", help="block until OME has done something (here: released a held revision)"
    )
    wait.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    wait.add_argument(
        "--for",
        dest="condition",
        required=True,
        help="held-revision=unheld (migration=terminal needs migrations: not built yet)",
    )
    wait.add_argument("--component", required=True, help=f"the component: {', '.join(COMPONENTS)}")
    wait.add_argument(
        "--revision",
        help="the held revision (full name or hash); without it, until no block is Held",
    )
    wait.add_argument(
        "--timeout",
        type=_duration,
        default=DEFAULT_WAIT,
        help="how long to wait (default 60s; 0: check once)",
    )
    _kube_flags(wait)
    status.add_argument(
        "--manager-namespace",
        default=DEFAULT_MANAGER_NAMESPACE,
        help="where the manager's inferenceservice-config lives (default ome), read only when "
        "the deployment mode falls back to its deploy.defaultDeploymentMode",
    )
    return parser


BUILT: Final = ("list", "retry-blocks", "status", "release-held")


def _check_command(argv: Sequence[str]) -> None:
    """Name what isn't built before argparse's own wording (which varies by Python)."""
    words = [word for word in argv if not word.startswith("-")]
    if argv and argv[0] in ("-h", "--help"):
        return
    if not words or words[0] not in ("instance", "wait"):
        command = words[0] if words else ""
        raise UsageError(
            f'unknown command "{command}" for "kubectl ome": this build has kubectl ome '
            "instance list, retry-blocks, status and release-held, and kubectl ome wait"
        )
    if words[0] == "instance" and len(words) > 1 and words[1] not in BUILT:
        built = ", ".join(BUILT[:-1]) + " and " + BUILT[-1]
        raise UsageError(
            f'unknown subcommand "{words[1]}" for "kubectl ome instance": {words[1]} is not a '
            f"subcommand (this build has {built})"
        )


def _check(args: argparse.Namespace) -> None:
    if args.command == "wait":
        _check_wait(args)
        return
    if args.subcommand is None:
        raise UsageError(
            '"kubectl ome instance" needs a subcommand: list, retry-blocks, status or release-held'
        )
    if args.subcommand == "release-held" and args.output == "wide":
        args.output = "table"  # release-held treats -o wide as table
    allowed = STATUS_OUTPUTS if args.subcommand == "status" else OUTPUTS
    if args.output not in allowed:
        raise UsageError(
            f'unknown output format "{args.output}" for instance {args.subcommand} '
            f"(use {', '.join(allowed)}; only instance status has a wide view)"
        )
    revision = getattr(args, "revision", None)
    if revision is not None and not _REVISION_ARG.fullmatch(revision):
        why = (
            " (that is retry-blocks' TARGET digest, not the revision's hash)"
            if "#" in revision
            else ""
        )
        raise UsageError(
            f'invalid --revision "{revision}"{why}: want the full revision, such as '
            "chat-engine-7f9c4d2b, or its hash, the last 8 characters, such as 7f9c4d2b"
        )
    component = getattr(args, "component", None)
    if component is not None and component not in COMPONENTS:
        raise UsageError(
            f'invalid --component "{component}": must be one of {", ".join(COMPONENTS)}'
        )


def _check_wait(args: argparse.Namespace) -> None:
    if args.condition not in WAIT_CONDITIONS:
        raise UsageError(
            f'invalid --for "{args.condition}": want held-revision=unheld (or '
            "migration=terminal, once migrations are built)"
        )
    if args.condition == "migration=terminal":
        raise UsageError(
            "--for=migration=terminal needs migrations, which this build doesn't have yet"
        )
    if args.component not in COMPONENTS:
        raise UsageError(
            f'invalid --component "{args.component}": must be one of {", ".join(COMPONENTS)}'
        )
    if args.revision is not None and not _REVISION_ARG.fullmatch(args.revision):
        raise UsageError(
            f'invalid --revision "{args.revision}": want the full revision, such as '
            "chat-engine-7f9c4d2b, or its hash, the last 8 characters, such as 7f9c4d2b"
        )


def default_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The context's namespace, as kubectl takes it (from ``--kubeconfig``, else the files of
    ``$KUBECONFIG`` merged, else ``~/.kube/config``); ``default`` when it names none."""
    from kubernetes_asyncio import config as kconfig

    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        contexts, current = kconfig.list_kube_config_contexts(path)
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


@dataclass(frozen=True, slots=True)
class Streams:
    """Where a run reads and writes (the terminal, or a test's buffers), its clocks, and
    release-held's budget."""

    out: TextIO
    err: TextIO
    stdin: TextIO
    now: Callable[[], float]
    """Wall clock (epoch seconds), for the times in status."""
    monotonic: Callable[[], float]
    budget: float = release_held.BUDGET_SECONDS
    """Seconds release-held has in all, the prompt's wait included (45; shorter in tests)."""


async def _execute(args: argparse.Namespace, *, io: Streams) -> int:
    out = io.out
    now = io.now()
    started = io.monotonic()
    namespace = args.namespace or default_namespace(args.kubeconfig, args.context)
    try:
        config = await load_config(args.kubeconfig, context=args.context)
    except Exception as exc:
        raise CommandError(f"cannot load the kubeconfig: {exc}") from None
    async with KubeClient(
        config, qps=50.0, burst=100, user_agent="kubectl-ome", timeout=args.request_timeout
    ) as client:
        if args.command == "wait":
            return await _wait(client, args, namespace=namespace, io=io, started=started)
        isvc, replicas, list_error = await _read(client, namespace, args.inferenceservice)
        collection = collect(isvc, replicas, list_error=list_error)
        if args.subcommand == "status":
            return await _status(client, args, collection, namespace=namespace, out=out)
        if args.subcommand == "release-held":
            return await _release(
                client, args, collection, namespace=namespace, io=io, started=started
            )
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
    collection: Collection,
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
        # Only the pods the report shows, each by name: a namespace's Warning events can be
        # many more than one Instance's.
        shown = [str(p["metadata"]["name"]) for p in instance_status.pick_pods(pods)]
        try:
            found = await asyncio.gather(
                *(
                    client.list_all(
                        EVENTS,
                        namespace,
                        fieldSelector=f"involvedObject.kind=Pod,involvedObject.name={pod},"
                        "type=Warning",
                    )
                    for pod in shown
                )
            )
        except ApiError as exc:
            errors.append(f"list events: {exc.message}")
        else:
            events = [event for each in found for event in each]
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


async def _wait(
    client: KubeClient, args: argparse.Namespace, *, namespace: str, io: Streams, started: float
) -> int:
    """``--for=held-revision=unheld``: read the component's InferenceReplica (through the
    InferenceService, as every subcommand does) until OME took the release, or time runs
    out. Polls once a second: a wait of minutes costs a GET a second."""
    what = f"held-revision={args.revision}" if args.revision else "held-revision"
    while True:
        collection = await _read_collection(client, namespace, args.inferenceservice)
        read = collection.components.get(args.component)
        if not collection.listed or read is None or read.source is None:
            reason = (
                collection.issues[0].message
                if collection.issues
                else (
                    f"no InferenceReplica of InferenceService {namespace}/{args.inferenceservice} "
                    f"runs the {args.component}"
                )
            )
            raise CommandError(f"cannot wait for {what}=unheld: {reason}")
        if release_held.unheld(read.source, revision=args.revision):
            io.out.write(f"inferencereplica.ome.io/{read.replica} {what} unheld\n")
            return EXIT_OK
        if io.monotonic() - started + WAIT_POLL > args.timeout:
            raise CommandError(
                f"timed out waiting for {what}=unheld on inferencereplica.ome.io/{read.replica} "
                f"after {args.timeout:g}s"
            )
        await asyncio.sleep(WAIT_POLL)


async def _read_collection(client: KubeClient, namespace: str, name: str) -> Collection:
    isvc, replicas, list_error = await _read(client, namespace, name)
    return collect(isvc, replicas, list_error=list_error)


def out_of_time(budget: float) -> str:
    """The error of a release-held that spent its budget, at the prompt or after it."""
    return (
        f"release-held ran out of its {budget:g} s; nothing changed. Run kubectl ome instance "
        "retry-blocks before you try again"
    )


async def _within(work: Awaitable[T], seconds: float, *, budget: float) -> T:
    """``work``, or :class:`CommandError` once release-held's budget is spent."""
    try:
        return await asyncio.wait_for(work, timeout=seconds)
    except TimeoutError:
        raise CommandError(out_of_time(budget)) from None


async def read_line(stdin: TextIO, *, timeout: float) -> str | None:
    """One line from ``stdin``, waiting at most ``timeout`` seconds: the line (``""`` at end
    of input), or ``None`` when the time ran out first.

    Why not ``readline`` in a thread: a thread blocked in a read can't be stopped, so after
    the prompt gave up the interpreter's exit waited for it (asyncio's default executor is
    joined when the loop closes) until the user typed a line or closed stdin: forever for a
    pipe held open or a terminal nobody watches. Here the event loop watches the file
    descriptor and each read takes only what is there, so an open, silent stdin or bytes
    that trickle in without a newline cost nothing when the time is up. A descriptor the
    loop can't watch (a regular file, ``/dev/null``) never blocks, and neither does a stream
    without one (a test's ``StringIO``): those are read directly. Reads the descriptor past
    Python's buffer, so nothing may have read ``stdin`` before (nothing does).
    """
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return stdin.readline()
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[bytes] = loop.create_future()
    received = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        received.extend(chunk)
        if (not chunk or b"\n" in chunk) and not answer.done():
            answer.set_result(bytes(received))

    try:
        loop.add_reader(fd, readable)
    except (OSError, NotImplementedError, ValueError):
        return stdin.readline()
    try:
        line = await asyncio.wait_for(answer, timeout=max(timeout, 0.0))
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(fd)
    encoding = getattr(stdin, "encoding", None) or "utf-8"
    return line.split(b"\n", 1)[0].decode(encoding, errors="replace")


async def _confirm(io: Streams, *, timeout: float) -> bool:
    io.err.write("Release this held revision? [y/N]: ")
    io.err.flush()
    answer = await read_line(io.stdin, timeout=timeout)
    if answer is None:
        io.err.write("\n")
        raise CommandError(out_of_time(io.budget))
    return answer.strip().lower() in ("y", "yes")


async def _release(
    client: KubeClient,
    args: argparse.Namespace,
    first: Collection,
    *,
    namespace: str,
    io: Streams,
    started: float,
) -> int:
    """The guarded flow: check, preview, confirm, read again and check again, then patch,
    within ``io.budget`` (:data:`~omed.cli.release_held.BUDGET_SECONDS`) of ``started``
    (before the kubeconfig is loaded); the prompt's wait counts, whatever stdin does."""
    deadline = started + io.budget

    def left() -> float:
        remaining = deadline - io.monotonic()
        if remaining <= 0:
            raise CommandError(out_of_time(io.budget))
        return remaining

    try:
        target = release_held.check(
            first, component=args.component, revision=args.revision, now=int(io.now())
        )
    except release_held.Refused as exc:
        raise CommandError(str(exc)) from None
    io.err.write(release_held.PREVIEW_TITLE + "\n")
    io.err.write(render_table(release_held.preview_rows(target)))
    if not args.yes and not await _confirm(io, timeout=left()):
        raise CommandError("release cancelled; nothing changed")
    again = await _within(
        _read_collection(client, namespace, args.inferenceservice), left(), budget=io.budget
    )
    try:
        confirmed = release_held.check(
            again, component=args.component, revision=args.revision, now=int(io.now())
        )
    except release_held.Refused as exc:
        raise CommandError(
            f"{exc} (found when checking again after you confirmed); nothing changed. Run "
            "kubectl ome instance retry-blocks before you try again"
        ) from None
    if confirmed.revision != target.revision:
        raise CommandError(
            f"--revision {args.revision} now matches {confirmed.revision}, not the previewed "
            f"{target.revision}; nothing changed. Run kubectl ome instance retry-blocks before "
            "you try again"
        )
    if args.dry_run != "client":
        params = {"dryRun": "All"} if args.dry_run == "server" else {}
        try:
            await _within(
                client.patch(
                    INFERENCE_REPLICAS,
                    confirmed.replica,
                    release_held.patch(confirmed),
                    namespace,
                    **params,
                ),
                left(),
                budget=io.budget,
            )
        except Conflict:
            raise CommandError(
                f"InferenceReplica {namespace}/{confirmed.replica} changed after it was checked; "
                "nothing changed. Run kubectl ome instance retry-blocks before you try again"
            ) from None
        except ApiError as exc:
            raise CommandError(
                f"patch InferenceReplica {namespace}/{confirmed.replica}: {exc.message}. Run "
                "kubectl ome instance retry-blocks before you try again"
            ) from None
    report = release_held.result(
        confirmed, isvc=args.inferenceservice, component=args.component, dry_run=args.dry_run
    )
    if args.output == "table":
        io.out.write(render_table(release_held.result_rows(report)))
    else:
        io.out.write(_dump(report, args.output))
    return EXIT_OK


async def run(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    stdin: TextIO | None = None,
    now: float | None = None,
    budget: float = release_held.BUDGET_SECONDS,
) -> int:
    """Run the plugin in-process; returns the exit code. ``now`` (epoch seconds) fixes the
    clock that retry-blocks and release-held judge times against; ``stdin`` answers
    release-held's prompt; ``budget`` is the seconds release-held has in all (45; tests
    shorten it)."""
    out = out or sys.stdout
    err = err or sys.stderr
    io = Streams(
        out=out,
        err=err,
        stdin=stdin or sys.stdin,
        now=time.time if now is None else (lambda: now),
        monotonic=time.monotonic,
        budget=budget,
    )
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
        return await _execute(args, io=io)
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
