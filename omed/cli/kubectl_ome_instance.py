"""The ``instance`` commands and ``wait`` of ``kubectl ome`` (``status`` is in
:mod:`omed.cli.kubectl_ome_status`): the flags checked, the reads, the guarded release, and
where each line goes.

Why a module of its own: this is what needs the API client and the report builders, which
take far longer to import than the plugin's help takes to print; :mod:`omed.cli.kubectl_ome`
imports this module only when one of these commands runs. What the reports say is decided in
:mod:`omed.cli.instances`, :mod:`omed.cli.instance_status` and :mod:`omed.cli.release_held`,
without I/O.

Invariant: every check of a flag's value happens before the kubeconfig is loaded, so a bad
flag costs no API call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TextIO, TypeVar

import orjson

from omed.api.constants import COMPONENTS, TERMINAL_MIGRATION_PHASES
from omed.cli.instances import (
    UNAVAILABLE,
    Collection,
    Component,
    collect,
    list_names,
    list_report,
    list_rows,
    render_table,
    retry_block_names,
    retry_block_rows,
    retry_blocks,
    retry_blocks_report,
)
from omed.cli.kubectl_ome import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_UNMET,
    LIST_OUTPUTS,
    OUTPUTS,
    WAIT_CONDITIONS,
    CommandError,
    Streams,
    UsageError,
)
from omed.kube.client import KubeClient, load_config
from omed.kube.errors import ApiError, Conflict
from omed.kube.resources import INFERENCE_REPLICAS, INFERENCE_SERVICES

__all__ = [
    "check_component",
    "check_output",
    "component_replica",
    "confirm",
    "default_namespace",
    "dump",
    "list_command",
    "out_of_time",
    "read_collection",
    "read_line",
    "release_held_command",
    "retry_blocks_command",
    "wait_command",
    "with_client",
    "within",
]

T = TypeVar("T")

_REVISION_ARG: Final = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?-)?[0-9a-f]{8}")
WAIT_POLL: Final = 1.0
RELEASE_PROMPT: Final = "Release this held revision? [y/N]: "
YAML_WIDTH: Final = 2**31 - 1
"""PyYAML folds long strings at 80 columns by default; a report's values (messages, digests,
reasons) are printed on one line each, whatever their length, as kubectl's -o yaml does."""


def check_output(args: argparse.Namespace, command: str, allowed: tuple[str, ...]) -> None:
    if args.output not in allowed:
        raise UsageError(
            f'unknown output format "{args.output}" for instance {command} '
            f"(use {', '.join(allowed)}; only instance status has a wide view)"
        )


def check_component(args: argparse.Namespace) -> None:
    if args.component not in COMPONENTS:
        raise UsageError(
            f'invalid --component "{args.component}": must be one of {", ".join(COMPONENTS)}'
        )


def _check_revision(revision: str | None) -> None:
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


def default_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The context's namespace, as kubectl takes it (from ``--kubeconfig``, else the files of
    ``$KUBECONFIG`` merged, else ``~/.kube/config``); ``default`` when it names none."""
    from omed.kube.kubeconfig_loaders import list_kube_config_contexts

    path = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        contexts, current = list_kube_config_contexts(path)
    except Exception:  # in-cluster, or a kubeconfig that load_config will report on
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


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


def dump(report: dict[str, Any], output: str) -> str:
    if output == "json":
        return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n"
    import yaml  # only -o yaml needs it

    return yaml.safe_dump(report, sort_keys=False, allow_unicode=True, width=YAML_WIDTH)


def _table(rows: list[list[str]], *, no_headers: bool) -> str:
    """kubectl get's table, or with ``--no-headers`` its rows alone (padded to their own
    widths, as kubectl pads them)."""
    return render_table(rows[1:] if no_headers else rows)


def _names(names: list[str]) -> str:
    return "".join(name + "\n" for name in names)


async def with_client(
    args: argparse.Namespace,
    work: Callable[[KubeClient, str], Awaitable[T]],
    *,
    load_error: str | None = None,
) -> T:
    """``work(client, namespace)`` with a client for the kubeconfig flags. A kubeconfig that
    can't be loaded is ``cannot load the kubeconfig: <why>``, or ``load_error`` for a command
    whose upstream words fix it."""
    namespace = args.namespace or default_namespace(args.kubeconfig, args.context)
    try:
        config = await load_config(args.kubeconfig, context=args.context)
    except Exception as exc:
        raise CommandError(load_error or f"cannot load the kubeconfig: {exc}") from None
    async with KubeClient(
        config, qps=50.0, burst=100, user_agent="kubectl-ome", timeout=args.request_timeout
    ) as client:
        return await work(client, namespace)


async def list_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome instance list``."""
    check_output(args, "list", LIST_OUTPUTS)
    collection = await with_client(
        args, lambda client, ns: read_collection(client, ns, args.inferenceservice)
    )
    if args.output == "table":
        io.out.write(_table(list_rows(collection), no_headers=args.no_headers))
    elif args.output == "name":
        io.out.write(_names(list_names(collection)))
    else:
        io.out.write(dump(list_report(collection), args.output))
    return EXIT_ERROR if collection.state == UNAVAILABLE else EXIT_OK


async def retry_blocks_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome instance retry-blocks``."""
    check_output(args, "retry-blocks", LIST_OUTPUTS)
    check_component(args)
    now = int(io.now())
    collection = await with_client(
        args, lambda client, ns: read_collection(client, ns, args.inferenceservice)
    )
    report = retry_blocks(collection, args.component, now=now)
    if args.output == "table":
        io.out.write(_table(retry_block_rows(report, now=now), no_headers=args.no_headers))
    elif args.output == "name":
        io.out.write(_names(retry_block_names(report)))
    else:
        io.out.write(dump(retry_blocks_report(collection, report), args.output))
    return EXIT_ERROR if collection.state == UNAVAILABLE else EXIT_OK


async def release_held_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome instance release-held``: the guarded flow of :func:`_release`."""
    if args.output == "wide":
        args.output = "table"  # release-held treats -o wide as table
    check_output(args, "release-held", OUTPUTS)
    _check_revision(args.revision)
    check_component(args)
    # The budget counts from before the kubeconfig is loaded, but not Python's imports: the
    # kubeconfig loader's (a fraction of a second on a loaded machine) are the interpreter
    # starting, not the command.
    import omed.kube.kubeconfig_loaders  # noqa: F401

    started = io.monotonic()

    async def work(client: KubeClient, namespace: str) -> int:
        collection = await read_collection(client, namespace, args.inferenceservice)
        return await _release(client, args, collection, namespace=namespace, io=io, started=started)

    return await with_client(args, work)


_UUID: Final = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
)
MIGRATION_POLL: Final = 5.0
"""wait --for=migration=terminal reads the service and its replicas every 5 s (upstream's)."""


async def wait_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome wait``: one scheme for both predicates: each takes only its own flags;
    exit 0 when the condition holds, 2 (``EXIT_UNMET``) when it didn't within ``--timeout``
    or the InferenceService was replaced, 1 for an error."""
    if args.condition not in WAIT_CONDITIONS:
        raise UsageError(
            f'invalid --for "{args.condition}": want held-revision=unheld or migration=terminal'
        )
    if args.condition == "migration=terminal":
        for flag, value in (("--component", args.component), ("--revision", args.revision)):
            if value is not None:
                raise UsageError(f"{flag} is not a flag of --for=migration=terminal")
        if args.request_id is None:
            raise UsageError("--for=migration=terminal needs --request-id")
        if not _UUID.fullmatch(args.request_id):
            raise UsageError(
                f'invalid --request-id "{args.request_id}": want the request-id migration '
                "start printed, a UUID such as 7c9e6679-7425-40de-944b-e07fc1f90ae7"
            )
        poll = _wait_migration
    else:
        if args.request_id is not None:
            raise UsageError("--request-id is not a flag of --for=held-revision=unheld")
        if args.component is None:
            raise UsageError("--for=held-revision=unheld needs --component")
        check_component(args)
        _check_revision(args.revision)
        poll = _wait
    started = io.monotonic()
    return await with_client(
        args,
        lambda client, namespace: poll(client, args, namespace=namespace, io=io, started=started),
    )


def _unmet(message: str) -> CommandError:
    return CommandError(message, exit_code=EXIT_UNMET)


async def _next_read(
    io: Streams,
    args: argparse.Namespace,
    *,
    started: float,
    every: float,
    waiting_for: str,
    detail: str = "",
) -> None:
    """Sleep ``every`` seconds until a wait's next read, or end the wait unmet when that read
    would come after ``--timeout`` (counted from ``started``): a wait never overruns it."""
    if io.monotonic() - started + every > args.timeout:
        raise _unmet(f"timed out waiting for {waiting_for} after {args.timeout:g}s{detail}")
    await asyncio.sleep(every)


async def _wait_migration(
    client: KubeClient, args: argparse.Namespace, *, namespace: str, io: Streams, started: float
) -> int:
    """``--for=migration=terminal``: the record of ``--request-id`` in the status of the
    service's InferenceReplicas (the identity-checked ones, as every subcommand reads them)
    reaches Completed, Failed or Relocated. The service's uid is pinned at the first read: a
    service deleted and created again under the name is another one, and the wait ends
    unmet."""
    target = f"inferenceservice.ome.io/{args.inferenceservice}"
    pinned: str | None = None
    phase = "NotRecorded"
    while True:
        collection = await read_collection(client, namespace, args.inferenceservice)
        uid = (collection.isvc.get("metadata") or {}).get("uid")
        pinned = pinned or uid
        if uid != pinned:
            raise _unmet(f"{target} was replaced while waiting for migration={args.request_id}")
        for read in collection.components.values():
            records = ((read.source or {}).get("status") or {}).get("migrations") or []
            for record in records if isinstance(records, list) else []:
                if isinstance(record, dict) and record.get("requestUUID") == args.request_id:
                    phase = str(record.get("phase") or "NotRecorded")
                    if phase in TERMINAL_MIGRATION_PHASES:
                        io.out.write(
                            f"{target} migration={args.request_id} terminal ({phase}; "
                            f"component {read.component})\n"
                        )
                        return EXIT_OK
        await _next_read(
            io,
            args,
            started=started,
            every=MIGRATION_POLL,
            waiting_for=f"migration={args.request_id}=terminal on {target}",
            detail=f" (phase {phase})",
        )


async def _wait(
    client: KubeClient, args: argparse.Namespace, *, namespace: str, io: Streams, started: float
) -> int:
    """``--for=held-revision=unheld``: read the component's InferenceReplica (through the
    InferenceService, as every subcommand does) until OME took the release, or time runs
    out. Polls once a second: a wait of minutes costs a GET a second."""
    from omed.cli import release_held

    what = f"held-revision={args.revision}" if args.revision else "held-revision"
    while True:
        collection = await read_collection(client, namespace, args.inferenceservice)
        read, source = component_replica(
            collection, args, namespace=namespace, cannot=f"cannot wait for {what}=unheld"
        )
        if release_held.unheld(source, revision=args.revision):
            io.out.write(f"inferencereplica.ome.io/{read.replica} {what} unheld\n")
            return EXIT_OK
        await _next_read(
            io,
            args,
            started=started,
            every=WAIT_POLL,
            waiting_for=f"{what}=unheld on inferencereplica.ome.io/{read.replica}",
        )


async def read_collection(client: KubeClient, namespace: str, name: str) -> Collection:
    isvc, replicas, list_error = await _read(client, namespace, name)
    return collect(isvc, replicas, list_error=list_error)


def component_replica(
    collection: Collection, args: argparse.Namespace, *, namespace: str, cannot: str
) -> tuple[Component, Mapping[str, Any]]:
    """The ``--component``'s InferenceReplica as read, or the command's error: ``cannot``
    (what the command could not do) and why, the collection's first issue or that no
    replica runs the component."""
    read = collection.components.get(args.component)
    if collection.listed and read is not None and read.source is not None:
        return read, read.source
    reason = (
        collection.issues[0].message
        if collection.issues
        else (
            f"no InferenceReplica of InferenceService {namespace}/{args.inferenceservice} "
            f"runs the {args.component}"
        )
    )
    raise CommandError(f"{cannot}: {reason}")


def out_of_time(budget: float) -> str:
    """The error of a release-held that spent its budget, at the prompt or after it."""
    return (
        f"release-held ran out of its {budget:g} s; nothing changed. Run kubectl ome instance "
        "retry-blocks before you try again"
    )


async def within(work: Awaitable[T], seconds: float, *, timed_out: str) -> T:
    """``work``, or :class:`CommandError` ``timed_out`` once a guarded action's budget is
    spent (``seconds`` is what is left of it)."""
    try:
        return await asyncio.wait_for(work, timeout=seconds)
    except TimeoutError:
        raise CommandError(timed_out) from None


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


async def confirm(io: Streams, *, prompt: str, timeout: float, timed_out: str) -> bool:
    """A guarded action's prompt on stderr, answered from stdin within ``timeout`` seconds:
    ``y`` or ``yes`` (any case) confirms; no answer in time is :class:`CommandError`
    ``timed_out``."""
    io.err.write(prompt)
    io.err.flush()
    answer = await read_line(io.stdin, timeout=timeout)
    if answer is None:
        io.err.write("\n")
        raise CommandError(timed_out)
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
    within ``io.budget`` (by default :data:`~omed.cli.release_held.BUDGET_SECONDS`) of ``started``
    (before the kubeconfig is loaded); the prompt's wait counts, whatever stdin does."""
    from omed.cli import release_held

    budget = release_held.BUDGET_SECONDS if io.budget is None else io.budget
    deadline = started + budget

    def left() -> float:
        remaining = deadline - io.monotonic()
        if remaining <= 0:
            raise CommandError(out_of_time(budget))
        return remaining

    try:
        target = release_held.check(
            first, component=args.component, revision=args.revision, now=int(io.now())
        )
    except release_held.Refused as exc:
        raise CommandError(str(exc)) from None
    io.err.write(release_held.PREVIEW_TITLE + "\n")
    io.err.write(render_table(release_held.preview_rows(target)))
    if not args.yes and not await confirm(
        io, prompt=RELEASE_PROMPT, timeout=left(), timed_out=out_of_time(budget)
    ):
        raise CommandError("release cancelled; nothing changed")
    again = await within(
        read_collection(client, namespace, args.inferenceservice),
        left(),
        timed_out=out_of_time(budget),
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
            await within(
                client.patch(
                    INFERENCE_REPLICAS,
                    confirmed.replica,
                    release_held.patch(confirmed),
                    namespace,
                    **params,
                ),
                left(),
                timed_out=out_of_time(budget),
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
        io.out.write(dump(report, args.output))
    return EXIT_OK
