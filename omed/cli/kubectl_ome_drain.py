"""``kubectl ome migration drain-node``: the reads, the one prompt, the sends and the follow.

Why a module of its own: this is the command's I/O; what it decides (the Instances on the
node, their request IDs, which to send when, the report) is :mod:`omed.cli.drain_node`,
without I/O. Each request is ``migration start``'s: the same checks
(:func:`omed.cli.migration_start.collect_evidence`), the same reads
(:func:`omed.cli.kubectl_ome_migration.read_move`) and the same guarded JSON patch
(:func:`~omed.cli.kubectl_ome_migration.send_request`), which tests the InferenceService's
uid and resourceVersion as read just before it.

Invariants: nothing is written before the one prompt is answered (``--yes`` skips it;
``--dry-run client`` writes nothing at all); each request is checked again right before its
patch, and sent only while the caps leave room (:func:`omed.cli.drain_node.next_sends`); a
request whose patch was rejected because the service changed is read and checked again (at
most three times a round), never patched on evidence nobody checked; the command stops
following at ``--timeout`` and every request it sent stays for OME to carry out (a later run
follows it by its ID).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from omed.api import migrationrequest
from omed.api.constants import LABEL_MANAGED_BY, MANAGED_BY_OME_NATIVE
from omed.cli import drain_node as drain
from omed.cli import migration_start as core
from omed.cli.instances import Collection, render_table
from omed.cli.kubectl_ome import EXIT_OK, CommandError, Streams, UsageError
from omed.cli.kubectl_ome_instance import (
    confirm,
    default_namespace,
    dump,
    read_collection,
    with_client,
)
from omed.cli.kubectl_ome_migration import (
    BUDGET_SECONDS,
    Run,
    context_name,
    read_move,
    send_request,
    timestamp,
)
from omed.config import lifecycle_entry
from omed.controllers.inferencereplica.core.ops.migratenames import MSG_NEVER, go_duration
from omed.kube.client import KubeClient
from omed.kube.errors import ApiError
from omed.kube.resources import CONFIGMAPS, PODS

__all__ = ["POLL_SECONDS", "drain_command"]

CONFIG_NAME: Final = "inferenceservice-config"
POLL_SECONDS: Final = 2.0
"""How often the drain reads the services it follows."""
SEND_SECONDS: Final = 30.0
"""One send's reads, checks and patch."""
SETTLE_SECONDS: Final = 60.0
"""A request whose checks keep refusing it for this long (the replica's status lagging, the
Instance not Ready yet) is Refused; a shorter refusal is retried on the next round."""
MISSING_POLLS: Final = 5
"""Reads in a row that find a sent request neither waiting nor recorded: Unknown."""
REJECTED_TRIES: Final = 3


def _refused(exc: core.Refused) -> CommandError:
    return CommandError(str(exc), exit_code=exc.exit_code)


def _check(args: argparse.Namespace, namespace: str) -> tuple[core.Flags, int | None]:
    """The flags, with migration start's rules and words, before any read."""
    if args.all_namespaces and args.namespace:
        raise UsageError("-A and -n can't be used together")
    reason = args.reason if args.reason is not None else f"drain-node {args.node}"
    try:
        flags = core.check_flags(
            name="drain-node",
            namespace=namespace,
            component="engine",
            instance="0",
            from_node=args.node,
            hints=(),
            reason=reason,
            requested_by=args.requested_by,
            request_id=None,
            dry_run=args.dry_run,
            output=args.output,
            ome_namespace=args.ome_namespace,
            yes=args.yes,
        )
    except core.Refused as exc:
        raise _refused(exc) from None
    if not args.node:
        raise CommandError(core.VALUES_INVALID)
    limit: int | None = None
    if args.max_in_flight is not None:
        if not args.max_in_flight.isdigit() or int(args.max_in_flight) < 1:
            raise UsageError(f'invalid --max-in-flight "{args.max_in_flight}": want N >= 1')
        limit = int(args.max_in_flight)
    return flags, limit


async def drain_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome migration drain-node NODE``."""
    namespace = args.namespace or default_namespace(args.kubeconfig, args.context)
    flags, limit = _check(args, namespace)
    context = context_name(args.kubeconfig, args.context)

    async def work(client: KubeClient, _: str) -> int:
        where = None if args.all_namespaces else namespace
        return await _Drain(client, io, args, flags, limit=limit, where=where).run(context)

    return await with_client(args, work, load_error="selected context is unavailable or unsafe")


class _Caps:
    def __init__(
        self, *, max_in_flight: int, source: str, per_window: int | None, window: float | None
    ) -> None:
        self.max_in_flight = max_in_flight
        self.source = source
        self.per_window = per_window
        self.window = window


def _known(collection: Collection, audit: frozenset[str] | None) -> drain.Known:
    isvc = collection.isvc
    annotations = (isvc.get("metadata") or {}).get("annotations") or {}
    waiting = frozenset(
        uuid
        for key, _ in migrationrequest.requests_of(annotations)
        if (uuid := migrationrequest.request_uuid(key))
    )
    phases: dict[str, str] = {}
    for read in collection.components.values():
        for record in _records(read.source):
            phases[str(record.get("requestUUID"))] = str(record.get("phase") or "")
    history = (isvc.get("status") or {}).get("migrationHistory") or []
    others = frozenset(str(h.get("requestUUID")) for h in history if isinstance(h, Mapping))
    return drain.Known(waiting=waiting, phases=phases, others=others | (audit or frozenset()))


def _records(replica: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    records = ((replica or {}).get("status") or {}).get("migrations") or []
    return [r for r in records if isinstance(r, Mapping)] if isinstance(records, list) else []


def _waiting_for(collection: Collection, component: str) -> list[str]:
    annotations = (collection.isvc.get("metadata") or {}).get("annotations") or {}
    found = []
    for key, value in migrationrequest.requests_of(annotations):
        parsed = migrationrequest.parse(key, value)
        if isinstance(parsed, migrationrequest.MigrationRequest) and parsed.component == component:
            found.append(parsed.uuid)
    return found


class _Drain:
    """One run: its rows, the caps, and the clock."""

    def __init__(
        self,
        client: KubeClient,
        io: Streams,
        args: argparse.Namespace,
        flags: core.Flags,
        *,
        limit: int | None,
        where: str | None,
    ) -> None:
        self.client = client
        self.io = io
        self.args = args
        self.flags = flags
        self.limit = limit
        self.where = where
        self.node: str = args.node
        self.started = io.monotonic()
        self.rows: list[drain.Row] = []
        self.uids: dict[tuple[str, str], str] = {}
        self.conflicts: dict[tuple[str, str, str, int], float] = {}
        self.missing: dict[tuple[str, str, str, int], int] = {}
        self.peak = 0
        self.caps = _Caps(max_in_flight=limit or 0, source="-", per_window=None, window=None)

    # -- reads ---------------------------------------------------------------------------------

    def _run(self, seconds: float) -> Run:
        return Run(self.client, self.io, deadline=self.io.monotonic() + seconds)

    def _flags(self, subject: drain.Subject, *, dry_run: str | None = None) -> core.Flags:
        return replace(
            self.flags,
            name=subject.service,
            namespace=subject.namespace,
            component=subject.component,
            instance=subject.instance,
            dry_run=dry_run or self.flags.dry_run,
        )

    async def _pods(self) -> list[drain.Subject]:
        try:
            pods = await self.client.list_all(
                PODS,
                self.where,
                fieldSelector=f"spec.nodeName={self.node}",
                labelSelector=f"{LABEL_MANAGED_BY}={MANAGED_BY_OME_NATIVE}",
            )
        except ApiError:
            raise CommandError(core.READ_FAILED) from None
        return drain.subjects_on_node(pods, self.node)

    async def _read_caps(self) -> None:
        """``lifecycle.audit`` of OME's ConfigMap: the in-flight cap (``--max-in-flight`` only
        lowers it) and the rate window."""
        namespace = self.args.ome_namespace
        try:
            configmap = await self.client.get(CONFIGMAPS, CONFIG_NAME, namespace)
        except ApiError as exc:
            if self.limit is None:
                raise CommandError(
                    f"get ConfigMap {namespace}/{CONFIG_NAME}: {exc.message}; the caps are "
                    "unknown (pass --max-in-flight N to drain within N without reading them)"
                ) from None
            self.caps = _Caps(
                max_in_flight=self.limit, source="--max-in-flight", per_window=None, window=None
            )
            return
        audit = lifecycle_entry(configmap.get("data") or {})
        if audit.audit is None:
            raise CommandError(
                f"migration capacity policy unconfigured in {namespace}/{CONFIG_NAME} "
                f"({audit.audit_problem}): OME would hold every request; set lifecycle.audit"
            )
        cap = audit.audit.max_in_flight_migrations
        source = f"{namespace}/{CONFIG_NAME}"
        if self.limit is not None and self.limit < cap:
            cap, source = self.limit, "--max-in-flight"
        self.caps = _Caps(
            max_in_flight=cap,
            source=source,
            per_window=audit.audit.max_migrations_per_window,
            window=audit.audit.window,
        )

    # -- the run -------------------------------------------------------------------------------

    async def run(self, context: str) -> int:
        io = self.io
        subjects = await self._pods()
        if subjects:
            await self._read_caps()
        budget = BUDGET_SECONDS if io.budget is None else io.budget
        preview_run = Run(self.client, io, deadline=self.started + budget)
        first: set[tuple[str, str]] = set()
        for subject in subjects:
            self.rows.append(await self._plan(preview_run, subject, first=first))
        self._preview(context)
        sendable = any(row.state == drain.PENDING for row in self.rows)
        if self.flags.dry_run == "client":
            self.rows = [
                replace(row, state=drain.PLANNED) if row.state == drain.PENDING else row
                for row in self.rows
            ]
            return self._finish()
        if sendable and not self.flags.yes:
            isatty = getattr(io.stdin, "isatty", None)
            if not (isatty and isatty()):
                raise CommandError(core.NOT_CONFIRMED)
            if not await confirm(
                io, prompt=core.PROMPT, timeout=preview_run.left(), timed_out=core.DEADLINE
            ):
                raise CommandError(core.NOT_CONFIRMED)
        if self.flags.dry_run == "server":
            for index, row in enumerate(self.rows):
                if row.state == drain.PENDING:
                    self.rows[index] = await self._send(row)
            return self._finish()
        await self._follow()
        return self._finish()

    async def _plan(
        self, run: Run, subject: drain.Subject, *, first: set[tuple[str, str]]
    ) -> drain.Row:
        """The subject's row before anything is sent: resumed (its request already sent),
        skipped (mode Never), refused (a check of migration start), or pending."""
        flags = self._flags(subject)
        service = (subject.namespace, subject.service)
        try:
            collection, pods, revision, audit = await read_move(
                run, flags, first=service not in first
            )
        except CommandError as exc:
            if str(exc) == core.DEADLINE:
                raise
            return drain.Row(subject=subject, state=drain.ERROR, detail=str(exc))
        first.add(service)
        uid = str((collection.isvc.get("metadata") or {}).get("uid") or "")
        self.uids[service] = uid
        known = _known(collection, audit)
        where = drain.resume(subject, node=self.node, service_uid=uid, known=known)
        ended = ", ".join(f"{rid[:8]} {phase}" for rid, phase in where.ended)
        row = drain.Row(
            subject=subject,
            state=where.state,
            request_id=where.request_id,
            attempt=where.attempt,
            phase=where.phase,
            resumed=where.state in drain.ACTIVE_STATES,
            detail=f"earlier attempts: {ended}" if ended else "",
        )
        if row.resumed:
            return row
        read = collection.components.get(subject.component)
        mode = core.migration_mode(
            (read.source if read else None) or {}, collection.isvc, subject.component
        )
        if mode == "Never":
            return replace(row, state=drain.SKIPPED, request_id=None, detail=MSG_NEVER)
        if where.state == drain.REFUSED:
            return replace(
                row, detail=f"every attempt's request ID ({drain.MAX_ATTEMPTS}) has ended"
            )
        try:
            evidence = core.collect_evidence(
                flags=flags, collection=collection, pods=pods, revision=revision, audit_ids=audit
            )
        except core.Refused as exc:
            return replace(row, state=drain.REFUSED, request_id=None, detail=exc.cause)
        summary = f"mode {evidence.mode or 'Auto'}, revision {evidence.running_revision}"
        return replace(row, detail=f"{summary}; {row.detail}" if row.detail else summary)

    def _preview(self, context: str) -> None:
        flags = self.flags
        fields = [
            ["FIELD", "VALUE"],
            ["Action", drain.ACTION],
            ["Context", context or "-"],
            ["Node", self.node],
            ["Namespaces", self.where or "<all>"],
            ["OME NS", flags.ome_namespace],
            ["Dry-run", flags.dry_run],
            [
                "Max in flight",
                f"{self.caps.max_in_flight} ({self.caps.source})"
                if self.caps.source != "-"
                else "- (not read: nothing to move)",
            ],
            ["Per component", "1 (OME dispatches a component's migrations one at a time)"],
            ["Reason", f'"{flags.reason}"'],
            ["Requested by", flags.requested_by],
            ["Instances", str(len(self.rows))],
        ]
        err = self.io.err
        err.write(drain.PREVIEW_TITLE + "\n")
        err.write(render_table(fields))
        if self.rows:
            err.write(render_table(drain.table_rows(self.rows)))
        err.write(core.WARN_CAS + "\n")
        err.flush()

    def _finish(self) -> int:
        read = self.caps.source != "-"
        report = drain.report(
            self.rows,
            node=self.node,
            namespace=self.where,
            dry_run=self.flags.dry_run,
            max_in_flight=self.caps.max_in_flight if read else None,
            caps_source=self.caps.source if read else None,
            peak_in_flight=self.peak,
        )
        if self.flags.output in ("table", "wide"):
            if self.rows:
                self.io.out.write(render_table(drain.table_rows(self.rows)))
            else:
                self.io.out.write(f"No OMENative Instances on node {self.node}.\n")
        else:
            self.io.out.write(dump(report, self.flags.output))
        code = drain.exit_code(self.rows)
        return EXIT_OK if code == 0 else self._exit(code)

    def _exit(self, code: int) -> int:
        self.io.err.write(
            f"error: node {self.node} not drained: {drain.not_drained(self.rows)} "
            "(the report says why)\n"
        )
        return code

    def _set(self, index: int, row: drain.Row) -> None:
        before = self.rows[index]
        self.rows[index] = row
        if (before.state, before.phase) != (row.state, row.phase):
            self.io.err.write(drain.progress_line(row) + "\n")
            self.io.err.flush()

    # -- follow and send -----------------------------------------------------------------------

    async def _follow(self) -> None:
        """Rounds of read, send and follow until every row is final or ``--timeout``. Ctrl-C
        ends the rounds: the rows not final are Interrupted and the report is printed (the
        requests sent stay; a later run follows them by their IDs, even one whose patch was
        in flight)."""
        try:
            await self._rounds()
        except asyncio.CancelledError:
            for index, row in enumerate(self.rows):
                if row.state not in drain.FINAL_STATES:
                    self._set(index, replace(row, state=drain.INTERRUPTED))

    async def _rounds(self) -> None:
        deadline = self.started + self.args.timeout
        while True:
            loads = await self._refresh()
            for index, row in enumerate(self.rows):
                if row in drain.rate_spent(self.rows, loads):
                    self._set(
                        index,
                        replace(
                            row,
                            state=drain.DEFERRED,
                            detail=(
                                f"rate window spent ({self.caps.per_window} in the last "
                                f"{go_duration(self.caps.window or 0)})"
                            ),
                        ),
                    )
            picks = drain.next_sends(self.rows, loads=loads, max_in_flight=self.caps.max_in_flight)
            self.peak = max(self.peak, sum(load.in_flight for load in loads.values()) + len(picks))
            for pick in picks:
                index = self.rows.index(pick)
                self._set(index, await self._send(pick))
            if all(row.state in drain.FINAL_STATES for row in self.rows):
                return
            if self.io.monotonic() >= deadline:
                for index, row in enumerate(self.rows):
                    if row.state not in drain.FINAL_STATES:
                        self._set(index, replace(row, state=drain.TIMED_OUT))
                return
            await asyncio.sleep(POLL_SECONDS)

    async def _refresh(self) -> dict[tuple[str, str, str], drain.ReplicaLoad]:
        """Read each service the drain still acts on; follow its rows; the components' loads."""
        loads: dict[tuple[str, str, str], drain.ReplicaLoad] = {}
        services = sorted(
            {
                (r.subject.namespace, r.subject.service)
                for r in self.rows
                if r.state not in drain.FINAL_STATES
            }
        )
        for namespace, service in services:
            try:
                collection = await self._run(SEND_SECONDS).call(
                    read_collection(self.client, namespace, service)
                )
            except (CommandError, ApiError) as exc:
                self.io.err.write(f"warning: read {namespace}/{service}: {exc}; retrying\n")
                continue
            known = _known(collection, None)
            for read in collection.components.values():
                records = _records(read.source)
                waiting = _waiting_for(collection, read.component)
                left = None
                if self.caps.per_window is not None and self.caps.window is not None:
                    left = drain.window_left(
                        records,
                        limit=self.caps.per_window,
                        window_seconds=self.caps.window,
                        now=self.io.now(),
                        waiting=waiting,
                    )
                loads[(namespace, service, read.component)] = drain.ReplicaLoad(
                    in_flight=drain.in_flight_of(records, waiting), window_left=left
                )
            for index, row in enumerate(self.rows):
                if (row.subject.namespace, row.subject.service) != (namespace, service):
                    continue
                if row.state not in drain.ACTIVE_STATES:
                    continue
                owner = collection.components.get(row.subject.component)
                record = next(
                    (
                        r
                        for r in _records(owner.source if owner else None)
                        if r.get("requestUUID") == row.request_id
                    ),
                    None,
                )
                followed = drain.follow(row, known=known, record=record)
                gone = record is None and row.request_id not in known.waiting
                key = row.subject.key
                self.missing[key] = self.missing.get(key, 0) + 1 if gone else 0
                if self.missing[key] >= MISSING_POLLS:
                    followed = replace(
                        followed,
                        state=drain.UNKNOWN,
                        message="the request left the InferenceService without a record; "
                        "see kubectl ome migration status and the audit ConfigMap",
                    )
                self._set(index, followed)
        return loads

    async def _send(self, row: drain.Row) -> drain.Row:
        """Check the subject again, as migration start does, and send its request with the
        guarded patch. Pending again when a check refuses it for less than
        :data:`SETTLE_SECONDS` or the service kept changing under the patch."""
        subject = row.subject
        flags = self._flags(subject)
        assert row.request_id is not None
        cause = "the InferenceService kept changing under the patch"
        for _ in range(REJECTED_TRIES):
            run = self._run(SEND_SECONDS)
            try:
                collection, pods, revision, audit = await read_move(run, flags, first=False)
            except CommandError as exc:
                cause = str(exc)
                break
            known = _known(collection, audit)
            if row.request_id in known.waiting:
                return replace(row, state=drain.SENT)
            if row.request_id in known.phases or row.request_id in known.others:
                return replace(
                    row, state=drain.REFUSED, detail="its request ID is already known to OME"
                )
            here = sorted(
                str(p["metadata"].get("uid"))
                for p in pods
                if (p.get("spec") or {}).get("nodeName") == self.node
                and not p["metadata"].get("deletionTimestamp")
            )
            if tuple(here) != subject.pod_uids:
                return replace(
                    row, state=drain.REFUSED, detail="the Instance's pods changed since the preview"
                )
            try:
                evidence = core.collect_evidence(
                    flags=flags,
                    collection=collection,
                    pods=pods,
                    revision=revision,
                    audit_ids=audit,
                )
            except core.Refused as exc:
                cause = exc.cause
                break
            try:
                await send_request(
                    run,
                    flags,
                    evidence,
                    request_id=row.request_id,
                    requested_at=timestamp(self.io.now()),
                )
            except CommandError as exc:
                if exc.exit_code == core.EXIT_CONFLICT:
                    continue  # the service changed since the read: read and check again
                return replace(row, state=drain.UNKNOWN, message=str(exc))
            self.conflicts.pop(subject.key, None)
            if flags.dry_run == "server":
                return replace(row, state=drain.PLANNED, detail=core.MESSAGE_SERVER)
            return replace(row, state=drain.SENT, message="")
        first = self.conflicts.setdefault(subject.key, self.io.monotonic())
        if self.flags.dry_run == "server" or self.io.monotonic() - first >= SETTLE_SECONDS:
            return replace(row, state=drain.REFUSED, request_id=None, detail=cause)
        return replace(row, detail=f"retrying: {cause}")
