"""``kubectl ome migration start``: the reads, the guarded flow and where each line goes
(``migration status`` and ``migration history``, which only read, are
:mod:`omed.cli.kubectl_ome_migration_reports`).

Why a module of its own: this is the command's I/O (the API client, the prompt, the patch);
what it decides is in :mod:`omed.cli.migration_start`, without I/O. The prompt, its budget
and the bounded waits are release-held's (:func:`omed.cli.kubectl_ome_instance.confirm`,
:func:`~omed.cli.kubectl_ome_instance.within`, ``read_line``), so both guarded actions end a
silent stdin the same way.

Invariants: the command has 45 seconds in all, the prompt included, and each request at
most 10 (past them: ``context deadline exceeded``, exit 1); nothing is written before the
prompt is answered and the state read again; the one write is a JSON patch that tests the
InferenceService's uid and resourceVersion, so a service changed since the preview is
rejected by the API server (exit 3), never patched on evidence nobody saw.
"""

from __future__ import annotations

import argparse
import uuid as uuidlib
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from omed.api.constants import (
    DEPLOYMENT_MODE_OME_NATIVE,
    LABEL_COMPONENT,
    LABEL_INFERENCE_SERVICE,
    LABEL_INSTANCE_INDEX,
)
from omed.cli import migration_start as core
from omed.cli import release_held
from omed.cli.instances import Collection, collect, render_table
from omed.cli.kubectl_ome import (
    EXIT_OK,
    CommandError,
    Streams,
)
from omed.cli.kubectl_ome_instance import (
    confirm,
    default_namespace,
    dump,
    with_client,
    within,
)
from omed.cli.kubectl_ome_status import find_runtime
from omed.controllers.inferenceservice.core.mode import resolve_mode_json as resolve_mode
from omed.controllers.ledger import document as ledger
from omed.kube.client import JSON_PATCH, KubeClient
from omed.kube.errors import ApiError, Conflict, Invalid, NotFound
from omed.kube.resources import (
    CONFIGMAPS,
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    PODS,
)

__all__ = [
    "BUDGET_SECONDS",
    "REQUEST_SECONDS",
    "Run",
    "read_move",
    "send_request",
    "start_command",
    "timestamp",
]

T = TypeVar("T")

BUDGET_SECONDS: Final = 45.0
"""migration start has 45 seconds in all, the prompt's wait included."""
REQUEST_SECONDS: Final = 10.0
"""Each API request of migration start has at most 10 seconds."""
MAX_AUDIT_ENTRIES: Final = 800


def _refused(exc: core.Refused) -> CommandError:
    return CommandError(str(exc), exit_code=exc.exit_code)


def context_name(kubeconfig: str | None, context: str | None) -> str:
    """The kubeconfig context the command talks through (the preview's Context)."""
    if context:
        return context
    from omed.kube.kubeconfig_loaders import list_kube_config_contexts

    try:
        _, current = list_kube_config_contexts(kubeconfig or None)
    except Exception:
        return ""
    return str((current or {}).get("name") or "")


class Run:
    """One run's client, clock and budget."""

    def __init__(self, client: KubeClient, io: Streams, *, deadline: float) -> None:
        self.client = client
        self.io = io
        self.deadline = deadline

    def left(self) -> float:
        remaining = self.deadline - self.io.monotonic()
        if remaining <= 0:
            raise CommandError(core.DEADLINE)
        return remaining

    async def call(self, work: Awaitable[T]) -> T:
        return await within(work, min(self.left(), REQUEST_SECONDS), timed_out=core.DEADLINE)


async def read_move(
    run: Run, flags: core.Flags, *, first: bool
) -> tuple[Collection, list[dict[str, Any]], dict[str, Any] | None, frozenset[str] | None]:
    """The InferenceService, its replicas, the Instance's pods, its running revision's
    ControllerRevision and the IDs the audit ConfigMap knows (None when it can't be read)."""
    client = run.client
    try:
        isvc: dict[str, Any] = await run.call(
            client.get(INFERENCE_SERVICES, flags.name, flags.namespace)
        )
    except ApiError:
        raise CommandError(core.READ_FAILED) from None
    try:
        core.check_target(isvc)
    except core.Refused as exc:
        raise _refused(exc) from None
    if first:
        try:
            runtime, origin, error = await run.call(find_runtime(client, isvc, flags.namespace))
        except ApiError:
            raise CommandError(core.READ_FAILED) from None
        mode, source = resolve_mode(isvc, runtime, None)
        if (
            origin != "LiveRuntime"
            or error
            or (source != "Default" and mode != DEPLOYMENT_MODE_OME_NATIVE)
        ):
            raise CommandError(core.RUNTIME_UNAVAILABLE)
    try:
        replicas = await run.call(client.list_all(INFERENCE_REPLICAS, flags.namespace))
        selector = (
            f"{LABEL_INFERENCE_SERVICE}={flags.name},{LABEL_COMPONENT}={flags.component},"
            f"{LABEL_INSTANCE_INDEX}={flags.instance}"
        )
        pods = await run.call(client.list_all(PODS, flags.namespace, labelSelector=selector))
    except ApiError:
        raise CommandError(core.READ_FAILED) from None
    collection = collect(isvc, list(replicas))
    read = collection.components.get(flags.component)
    row = next((r for r in (read.rows if read else []) if r.get("index") == flags.instance), {})
    revision: dict[str, Any] | None = None
    if row.get("runningRevision"):
        try:
            revision = await run.call(
                client.get(CONTROLLER_REVISIONS, str(row["runningRevision"]), flags.namespace)
            )
        except NotFound:
            revision = None
        except ApiError:
            raise CommandError(core.READ_FAILED) from None
        if revision is not None and len(str(revision.get("data"))) > 1 << 20:
            raise CommandError(core.REVISION_INVALID)
    audit = await _audit_ids(run, isvc, flags.namespace)
    return collection, list(pods), revision, audit


async def _audit_ids(run: Run, isvc: Mapping[str, Any], namespace: str) -> frozenset[str] | None:
    """The request IDs of the audit ConfigMap (none when it isn't there); None when it can't
    be read, isn't the service's, or exceeds its bounds."""
    meta = isvc.get("metadata") or {}
    try:
        configmap = await run.call(
            run.client.get(CONFIGMAPS, ledger.ledger_name(str(meta.get("name"))), namespace)
        )
    except NotFound:
        return frozenset()
    except ApiError:
        return None
    owner = ledger.Owner(name=str(meta.get("name")), uid=str(meta.get("uid")))
    refs = (configmap.get("metadata") or {}).get("ownerReferences") or []
    if not ledger.owned_by(refs, owner):
        return None
    try:
        entries = ledger.read_entries(configmap.get("data"))
    except ledger.LedgerUnreadable:
        return None
    if len(entries) > MAX_AUDIT_ENTRIES or any(
        e.get("phase") not in ledger.PHASES for e in entries
    ):
        return None
    return frozenset(str(e.get("requestUUID")) for e in entries)


def timestamp(now: float) -> str:
    return datetime.fromtimestamp(int(now), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_result(io: Streams, report: dict[str, Any], output: str) -> None:
    if output in ("table", "wide"):
        io.out.write(render_table(release_held.result_rows(report)))
    else:
        io.out.write(dump(report, output))


async def start_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome migration start``."""
    namespace = args.namespace or default_namespace(args.kubeconfig, args.context)
    try:
        flags = core.check_flags(
            name=args.inferenceservice,
            namespace=namespace,
            component=args.component,
            instance=args.instance,
            from_node=args.from_node,
            hints=args.hint_node or (),
            reason=args.reason,
            requested_by=args.requested_by,
            request_id=args.request_id,
            dry_run=args.dry_run,
            output=args.output,
            ome_namespace=args.ome_namespace,
            yes=args.yes,
        )
    except core.Refused as exc:
        raise _refused(exc) from None
    import omed.kube.kubeconfig_loaders  # noqa: F401  (imports aren't the budget's)

    started = io.monotonic()
    budget = BUDGET_SECONDS if io.budget is None else io.budget
    context = context_name(args.kubeconfig, args.context)

    async def work(client: KubeClient, _: str) -> int:
        return await _start(Run(client, io, deadline=started + budget), flags, context=context)

    return await with_client(args, work, load_error="selected context is unavailable or unsafe")


async def _start(run: Run, flags: core.Flags, *, context: str) -> int:
    io = run.io
    collection, pods, revision, audit = await read_move(run, flags, first=True)
    try:
        evidence = core.collect_evidence(
            flags=flags, collection=collection, pods=pods, revision=revision, audit_ids=audit
        )
    except core.Refused as exc:
        raise _refused(exc) from None
    request_id = flags.request_id or str(uuidlib.uuid4())
    requested_at = timestamp(io.now())
    io.err.write(core.PREVIEW_TITLE + "\n")
    io.err.write(
        render_table(
            core.preview_rows(
                flags, evidence, context=context, request_id=request_id, requested_at=requested_at
            )
        )
    )
    io.err.write("".join(line + "\n" for line in core.warning_lines(evidence)))
    if flags.request_id is not None:
        try:
            core.lookup(flags, evidence)
        except core.Refused as exc:
            raise _refused(exc) from None
        report = core.result(
            flags, evidence, request_id=request_id, context=context, looked_up=True
        )
        _write_result(io, report, flags.output)
        return EXIT_OK
    if request_id in evidence.known_ids:
        raise CommandError(core.VALUES_INVALID)
    if not flags.yes:
        isatty = getattr(io.stdin, "isatty", None)
        if not (isatty and isatty()):
            raise CommandError(core.NOT_CONFIRMED)
        if not await confirm(io, prompt=core.PROMPT, timeout=run.left(), timed_out=core.DEADLINE):
            raise CommandError(core.NOT_CONFIRMED)
    again_collection, again_pods, again_revision, again_audit = await read_move(
        run, flags, first=False
    )
    try:
        again = core.collect_evidence(
            flags=flags,
            collection=again_collection,
            pods=again_pods,
            revision=again_revision,
            audit_ids=again_audit if again_audit is not None else audit,
        )
    except core.Refused as exc:
        raise _refused(exc) from None
    if again.fingerprint != evidence.fingerprint or again.from_node != evidence.from_node:
        raise CommandError(core.PRECONDITION, exit_code=core.EXIT_CONFLICT)
    if request_id in again.known_ids:
        raise CommandError(core.VALUES_INVALID)
    if flags.dry_run != "client":
        await send_request(run, flags, evidence, request_id=request_id, requested_at=requested_at)
    report = core.result(flags, evidence, request_id=request_id, context=context)
    _write_result(io, report, flags.output)
    return EXIT_OK


def _causes(exc: ApiError) -> str:
    """The API server's message and the causes its Status details list (the JSON patch
    library's error is only there)."""
    details = exc.body.get("details") if isinstance(exc.body, Mapping) else None
    causes = details.get("causes") if isinstance(details, Mapping) else None
    texts = [
        str(cause.get("message"))
        for cause in (causes if isinstance(causes, list) else [])
        if isinstance(cause, Mapping) and cause.get("message")
    ]
    return "; ".join([exc.message, *texts])


async def _changed_since(run: Run, flags: core.Flags, evidence: core.Evidence) -> bool:
    """Whether the InferenceService is no longer the one the preview showed. The API server
    answers a JSON patch whose ``test`` fails with a bare 422 (the patch library's error is
    not in the Status), so the command reads the service again to tell that from another
    refusal."""
    try:
        isvc = await run.call(run.client.get(INFERENCE_SERVICES, flags.name, flags.namespace))
    except (ApiError, CommandError):
        return False
    meta = isvc.get("metadata") or {}
    return (meta.get("uid"), meta.get("resourceVersion")) != (
        evidence.uid,
        evidence.resource_version,
    )


async def send_request(
    run: Run, flags: core.Flags, evidence: core.Evidence, *, request_id: str, requested_at: str
) -> None:
    """The guarded JSON patch, on the uid and resourceVersion the preview showed (the recheck
    read the pods and the replica again, not the service: a service changed since is the
    API server's rejection of the patch's test)."""
    body = core.request_body(flags, from_node=evidence.from_node, requested_at=requested_at)
    patch = core.json_patch(
        uid=evidence.uid,
        resource_version=evidence.resource_version,
        annotations=evidence.has_annotations,
        key=core.request_key(request_id),
        value=body,
    )
    params = {"dryRun": "All"} if flags.dry_run == "server" else {}
    try:
        await run.call(
            run.client.patch(
                INFERENCE_SERVICES,
                flags.name,
                patch,
                flags.namespace,
                content_type=JSON_PATCH,
                **params,
            )
        )
    except Conflict:
        raise CommandError(core.REJECTED, exit_code=core.EXIT_CONFLICT) from None
    except Invalid as exc:
        if await _changed_since(run, flags, evidence):
            raise CommandError(core.REJECTED, exit_code=core.EXIT_CONFLICT) from None
        raise CommandError(f"{core.UNKNOWN_OUTCOME}: {_causes(exc)}") from None
    except ApiError as exc:
        raise CommandError(f"{core.UNKNOWN_OUTCOME}: {_causes(exc)}") from None
    except CommandError as exc:
        if str(exc) == core.DEADLINE:
            raise CommandError(f"{core.UNKNOWN_OUTCOME}: {core.DEADLINE}") from None
        raise
