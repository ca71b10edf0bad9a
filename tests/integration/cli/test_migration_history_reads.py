"""migration history's reads against the real API server: the InferenceReplica list stops at
two pages of 32 (the rest is reported truncated, never read), and an audit ConfigMap that
isn't the service's own is never read, whatever its document holds.

The plugin runs in-process (``run``) with the session's admin kubeconfig; the test creates
what it reads as OME would have left it. No manager, no garbage collector: nothing changes
the objects meanwhile.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import pytest

from omed.cli import migration_history
from omed.cli.kubectl_ome import run
from omed.controllers.ledger import document as ledger
from omed.kube.client import KubeClient
from omed.kube.resources import CONFIGMAPS, INFERENCE_REPLICAS, INFERENCE_SERVICES

pytestmark = pytest.mark.integration


UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"


def ledger_document() -> str:
    row = ledger.LedgerEntry(
        request_uuid=UUID,
        component="engine",
        source_instance=3,
        surge_instance=4,
        phase=ledger.PHASE_COMPLETED,
        started_at=dt.datetime(2026, 9, 28, 10, 12, tzinfo=dt.UTC),
        completed_at=dt.datetime(2026, 9, 28, 10, 31, tzinfo=dt.UTC),
        outcome="migrated",
    )
    return ledger.render([row.to_json()])


async def history(kubeconfig: str, namespace: str) -> tuple[int, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["migration", "history", "chat", "-n", namespace, "--kubeconfig", kubeconfig]
    code = await run([*argv, "-o", "json"], out=out, err=err)
    assert err.getvalue() == ""
    return code, json.loads(out.getvalue())


async def test_the_replica_list_stops_at_two_pages_and_a_foreign_ledger_is_not_read(
    kube: KubeClient, kubeconfig: str, namespace: str, chat: Any
) -> None:
    service = await chat.service()
    uid = service["metadata"]["uid"]
    created = await kube.create(INFERENCE_REPLICAS, chat.replica("chat-engine", uid), namespace)
    status = {"observedGeneration": created["metadata"]["generation"]}
    await kube.patch(
        INFERENCE_REPLICAS, "chat-engine", {"status": status}, namespace, subresource="status"
    )
    audit = ledger.configmap_body(
        namespace=namespace, owner=ledger.Owner(name="chat", uid=uid), rows=[]
    )
    audit["data"] = {ledger.DATA_KEY: ledger_document()}
    await kube.create(CONFIGMAPS, audit, namespace)

    code, report = await history(kubeconfig, namespace)
    assert code == 0
    assert [(r["evidence"], r["requestID"]) for r in report["content"]["records"]] == [
        ("AuditHistory", UUID)
    ]
    assert report["content"]["issues"] == []
    auth = report["sources"][0]
    assert (auth["observedPages"], auth["observedItems"], auth["truncated"]) == (1, 1, False)

    # More labelled replicas than two pages hold: 64 read, the rest left unread, reported.
    for i in range(migration_history.MAX_PAGES * migration_history.PAGE_SIZE + 2):
        await kube.create(INFERENCE_REPLICAS, chat.replica(f"chat-stray-{i:02d}", uid), namespace)
    code, report = await history(kubeconfig, namespace)
    auth = report["sources"][0]
    assert (auth["observedPages"], auth["observedItems"], auth["truncated"]) == (2, 64, True)
    assert {"code": "AuthoritativeTruncated"} in report["content"]["issues"]
    assert report["warnings"] == [{"code": "Truncated"}]

    # A ledger of the name owned by another InferenceService: never read. (The owner is one
    # that exists: the garbage collector deletes an object whose owner it can't find.)
    other = await kube.create(
        INFERENCE_SERVICES,
        {
            "apiVersion": "ome.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "other"},
            "spec": {},
        },
        namespace,
    )
    foreign = await kube.get(CONFIGMAPS, ledger.ledger_name("chat"), namespace)
    foreign["metadata"]["ownerReferences"][0].update(name="other", uid=other["metadata"]["uid"])
    await kube.replace(CONFIGMAPS, foreign, namespace)
    code, report = await history(kubeconfig, namespace)
    assert code == 0
    assert [r["evidence"] for r in report["content"]["records"]] == []
    assert {"code": "AuditIdentityInvalid"} in report["content"]["issues"]
    assert report["sources"][2]["unavailableReason"] == "InvalidIdentity"
