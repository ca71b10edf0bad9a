"""``kubectl ome migration status`` and ``migration history``: their reads and where each
line goes (the reports are :mod:`omed.cli.migration_status` and
:mod:`omed.cli.migration_history`, without I/O).

Why a module apart from ``migration start``'s (:mod:`omed.cli.kubectl_ome_migration`): these
commands only read, and read plain JSON; the guarded flow's modules (its checks, the runtime
lookup, the pydantic models its deployment-mode resolution builds) are not theirs to import,
so each report costs little more than its reads.

Invariants: every check of a flag's value happens before the kubeconfig is loaded; a report
whose InferenceReplicas couldn't be read at all is an error (``status``) or printed and exit 1
(``history``).
"""

from __future__ import annotations

import argparse
from typing import Any

from omed.api.constants import LABEL_INFERENCE_SERVICE
from omed.cli import migration_history, migration_status
from omed.cli.instances import Collection, collect, render_table
from omed.cli.kubectl_ome import (
    EXIT_ERROR,
    EXIT_OK,
    OUTPUTS,
    STATUS_OUTPUTS,
    CommandError,
    Streams,
    UsageError,
)
from omed.cli.kubectl_ome_instance import dump, read_collection, with_client
from omed.controllers.ledger.document import ledger_name
from omed.kube.client import KubeClient
from omed.kube.errors import ApiError, Forbidden, NotFound, Unauthorized
from omed.kube.resources import CONFIGMAPS, INFERENCE_REPLICAS, INFERENCE_SERVICES

__all__ = ["history_command", "status_command"]


def _check_component(component: str | None) -> None:
    if component is not None and component not in ("engine", "decoder", "router"):
        raise UsageError(
            f'invalid --component "{component}": must be one of engine, decoder, router'
        )


async def status_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome migration status``."""
    if args.output not in OUTPUTS:
        raise UsageError("output must be table, json or yaml")
    _check_component(args.component)
    collection = await with_client(
        args, lambda client, ns: read_collection(client, ns, args.inferenceservice)
    )
    if not collection.listed:
        raise CommandError(migration_status.READ_FAILED)
    report = migration_status.report(collection, component=args.component)
    if args.output == "table":
        io.out.write(render_table(migration_status.rows(report)))
    else:
        io.out.write(dump(report, args.output))
    return EXIT_OK


def _unavailable(exc: ApiError) -> str:
    if isinstance(exc, Forbidden | Unauthorized):
        return migration_history.FORBIDDEN
    return migration_history.UNREADABLE


async def _history_read(
    client: KubeClient, namespace: str, name: str
) -> tuple[Collection, migration_history.ReplicaRead, migration_history.AuditRead]:
    """The reads of ``migration history``, each bounded: the InferenceService (the one read
    that must succeed), its labelled InferenceReplicas in at most two pages of 32 (a third
    page is left unread: truncated), and its audit ConfigMap, of which only ``history.json``
    of the service's own ledger is kept."""
    try:
        isvc: dict[str, Any] = await client.get(INFERENCE_SERVICES, name, namespace)
    except ApiError as exc:
        raise CommandError(f'get InferenceService "{namespace}/{name}": {exc.message}') from None
    items: list[dict[str, Any]] = []
    pages, token, truncated = 0, None, False
    try:
        while pages < migration_history.MAX_PAGES:
            page = await client.list_page(
                INFERENCE_REPLICAS,
                namespace,
                labelSelector=f"{LABEL_INFERENCE_SERVICE}={name}",
                limit=migration_history.PAGE_SIZE,
                _continue=token,
            )
            pages += 1
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                break
        truncated = bool(token)
    except ApiError as exc:
        replicas = migration_history.ReplicaRead(_unavailable(exc), pages, len(items))
        collection = collect(isvc, None, list_error=exc.message)
    else:
        replicas = migration_history.ReplicaRead(
            migration_history.AVAILABLE, pages, len(items), truncated
        )
        collection = collect(isvc, items[: migration_history.MAX_SOURCES])
    audit_name = ledger_name(name)
    try:
        configmap = await client.get(CONFIGMAPS, audit_name, namespace)
    except NotFound:
        audit = migration_history.AuditRead(namespace, audit_name, migration_history.ABSENT)
    except ApiError as exc:
        audit = migration_history.AuditRead(namespace, audit_name, _unavailable(exc))
    else:
        audit = migration_history.audit_read(configmap, isvc, namespace=namespace, name=audit_name)
    return collection, replicas, audit


async def history_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome migration history``: exit 0 when the report is printed, 1 (after
    printing it) when the InferenceReplicas, the one authoritative source, couldn't be read."""
    if args.output not in STATUS_OUTPUTS:
        raise UsageError(
            f'unsupported output format "{args.output}" (supported: table, wide, json, yaml)'
        )
    _check_component(args.component)
    collection, replicas, audit = await with_client(
        args, lambda client, ns: _history_read(client, ns, args.inferenceservice)
    )
    report = migration_history.report(
        collection, replicas=replicas, audit=audit, component=args.component, now=io.now()
    )
    if args.output == "table":
        io.out.write(render_table(migration_history.rows(report)))
    elif args.output == "wide":
        io.out.write(render_table(migration_history.wide_rows(report)))
    else:
        io.out.write(dump(report, args.output))
    return EXIT_OK if replicas.availability == migration_history.AVAILABLE else EXIT_ERROR
