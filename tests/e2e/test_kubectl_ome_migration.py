"""``kubectl ome migration start`` through the real kubectl, under the chart's manager: the
product's walk-through on ``chat``, every refusal on the way, and the request OME then carries
out.

One cluster for the whole walk (the suite's time budget): the chart's manager serves an
engine of four single-pod Instances (test_migration's world). While the checks and refusals
run, the test holds the leader Lease, so the manager that runs only stands by (it serves the
webhooks, which admit or refuse the patch, and reconciles nothing): nothing consumes a
request, so the lookup of a waiting request is deterministic. The prompt is answered on a
pseudo-terminal, as a user would; kubectl execs the plugin, which inherits it. Then the Lease
is released, the manager leads, and the request the plugin wrote moves Instance 3 to
Instance 4; the lookup of that taken request then exits 3. Last, ``migration history``, run
as a ServiceAccount with only the permissions the docs name for it, shows the request's record
in status (AUTH) and the audit ledger's row (AUDIT), and an audit document rewritten into
another shape fails closed (its issue, the AUTH row alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import _support as support
import pytest
from _support import eventually
from test_kubectl_ome import kubectl
from test_kubectl_ome_plan import read_only_kubeconfig, release_lease, standby
from test_migration import ENGINE, SERVICE, World, world  # noqa: F401  (world: the fixture)
from test_routing_endpoints import RUNTIME

from omed.cli import migration_start as core
from omed.controllers.ledger import document as ledger
from omed.kube.resources import CONFIGMAPS, INFERENCE_SERVICES

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REASON = "node maintenance"
HISTORY_RULES = [
    {"apiGroups": ["ome.io"], "resources": ["inferenceservices"], "verbs": ["get"]},
    {"apiGroups": ["ome.io"], "resources": ["inferencereplicas"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
]
"""What docs/kubectl-ome.md says migration history needs, and nothing else."""
PROMPT = core.PROMPT.encode()
UNKNOWN = "3f2a9c1e-0000-4000-8000-000000000001"


def env() -> dict[str, str]:
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


class Terminal:
    """A command whose stdin is a pseudo-terminal: waits for the prompt on stderr, answers."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.err = b""
        self.prompted = 0.0
        self.exited = 0.0

    async def run(
        self, *, before_answer: Any = None, answer: bytes | None = b"y\n"
    ) -> tuple[int, str, str]:
        master, slave = os.openpty()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                env=env(),
                stdin=slave,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            os.close(slave)
            slave = -1
            assert proc.stderr is not None and proc.stdout is not None
            deadline = time.monotonic() + 60
            while PROMPT not in self.err:
                chunk = await asyncio.wait_for(
                    proc.stderr.read(4096), timeout=max(deadline - time.monotonic(), 0)
                )
                assert chunk, self.err.decode()
                self.err += chunk
            self.prompted = time.monotonic()
            if before_answer is not None:
                await before_answer()
            if answer is not None:
                os.write(master, answer)
            out, rest = await asyncio.wait_for(
                asyncio.gather(proc.stdout.read(), proc.stderr.read()), timeout=120
            )
            await proc.wait()
            self.exited = time.monotonic()
        finally:
            with contextlib.suppress(OSError):
                os.close(master)
            if slave >= 0:
                os.close(slave)
        self.err += rest
        assert proc.returncode is not None
        return proc.returncode, out.decode(), self.err.decode()


def preview(err: str) -> dict[str, str]:
    """The preview's FIELD VALUE rows."""
    lines = err.splitlines()
    start = lines.index(core.PREVIEW_TITLE) + 2
    fields: dict[str, str] = {}
    for line in lines[start:]:
        field, sep, value = line.partition("   ")
        if not sep:
            break
        fields[field] = value.strip()
    return fields


def result(out: str) -> dict[str, str]:
    return {
        line.split(None, 1)[0]: line.split(None, 1)[1].strip()
        for line in out.splitlines()[1:]
        if line.strip()
    }


async def requests(target: World) -> dict[str, str]:
    isvc = await target.kube.get(INFERENCE_SERVICES, SERVICE, target.namespace)
    return {
        k: v
        for k, v in (isvc["metadata"].get("annotations") or {}).items()
        if k.startswith("ome.io/migration-request-v1-")
    }


async def test_the_walk_through_every_refusal_and_the_move(
    world: World,  # noqa: F811
    control_plane: Any,
    kubeconfig: str,
    tmp_path: Path,
) -> None:
    ns = world.namespace
    await world.start_manager("manager-a")
    body = support.inference_service(
        SERVICE, runtime="srt-engine", engine={"minReplicas": 4, "maxReplicas": 4}
    )
    await world.create_service(RUNTIME, body)
    await eventually(lambda: world.serving([0, 1, 2, 3]), timeout=120, what="4 ready endpoints")
    (source,) = [
        p for p in await world.pods() if p["metadata"]["labels"]["ome.io/instance-index"] == "3"
    ]
    node = source["spec"]["nodeName"]
    await standby(world, "manager-b")
    base = ["ome", "migration", "start", SERVICE, "-n", ns, "--component", "engine"]
    move = [*base, "--instance", "3", "--reason", REASON]

    # Step 1: the client dry run.
    code, out, err = await kubectl(control_plane, kubeconfig, *move, "--dry-run", "client", "--yes")
    assert code == 0, err
    fields = preview(err)
    isvc = await world.kube.get(INFERENCE_SERVICES, SERVICE, ns)
    assert fields["Target"] == f"InferenceService/{SERVICE}"
    assert fields["UID"] == isvc["metadata"]["uid"]
    assert (fields["Dry-run"], fields["Component"], fields["Instance"]) == ("client", "engine", "3")
    assert (fields["From node"], fields["Current nodes"]) == (node, node)
    assert (fields["Migration mode"], fields["Reason"]) == ("Auto", json.dumps(REASON))
    assert (fields["Source IR"], fields["Lookup only"]) == (ENGINE, "false")
    assert err.endswith(
        "Node hints are soft preferences; capacity, scheduling and controller convergence\n"
        "are not guaranteed.\n"
        "Parent UID/resourceVersion CAS is not an IR/Pod/runtime transaction.\n"
    )
    shown = result(out)
    assert shown["message"] == "Validated locally; no patch sent."
    assert (shown["accepted"], shown["applied"]) == ("No", "No")
    assert await requests(world) == {}

    # The server dry run: the API server and the webhook check the request; nothing stored.
    code, out, err = await kubectl(control_plane, kubeconfig, *move, "--dry-run=server", "--yes")
    assert code == 0, err
    assert result(out)["message"] == "API dry-run accepted; no changes persisted."
    assert await requests(world) == {}

    # Refusals: each its message and exit code, nothing stored.
    refusals = [
        ([*base, "--instance", "03"], 1, core.INSTANCE_INVALID),
        ([*move, "--reason", "token=abc", "--yes"], 1, core.VALUES_INVALID),
        ([*move, "--hint-node", node, "--from-node", node, "--yes"], 1, core.HINTS_INVALID),
        ([*move, "--frobnicate"], 1, core.FLAGS_INVALID),
        ([*base, "--instance", "7", "--yes"], 3, core.PRECONDITION),
        ([*move, "--from-node", "no-such-node", "--yes"], 3, core.PRECONDITION),
        ([*move], 1, core.NOT_CONFIRMED),  # no terminal, no --yes
        ([*move, "--request-id", UNKNOWN], 3, core.PRECONDITION),
        (
            ["ome", "migration", "start", "nope", "-n", ns, "--component=engine", "--instance=3"],
            1,
            core.READ_FAILED,
        ),
    ]
    for argv, wanted, message in refusals:
        code, out, err = await kubectl(control_plane, kubeconfig, *argv)
        assert (code, out, err.splitlines()[-1]) == (wanted, "", f"error: {message}"), argv
    await world.patch_service(
        SERVICE, {"metadata": {"annotations": {"ome.io/rollout-paused": "true"}}}
    )
    code, _, err = await kubectl(control_plane, kubeconfig, *move, "--yes")
    assert (code, err.splitlines()[-1]) == (3, f"error: {core.PRECONDITION}")
    await world.patch_service(
        SERVICE, {"metadata": {"annotations": {"ome.io/rollout-paused": None}}}
    )

    kubectl_argv = [str(control_plane.binaries.kubectl), *move, "--kubeconfig", kubeconfig]

    # The service changes between the preview and the patch: the patch's test rejects it.
    async def touch() -> None:
        await world.patch_service(SERVICE, {"metadata": {"labels": {"touched": "yes"}}})

    code, out, err = await Terminal(kubectl_argv).run(before_answer=touch)
    # The answer's echo is the terminal's, so the error follows the prompt on its line.
    assert (code, out) == (3, ""), err
    assert err.endswith(f"{core.PROMPT}error: {core.REJECTED}\n"), err
    assert await requests(world) == {}

    # Nobody answers: the 45 s budget (8 s here, the plugin run in-process) ends the prompt.
    script = (
        "import asyncio, sys\n"
        "from omed.cli.kubectl_ome import run\n"
        "sys.exit(asyncio.run(run(sys.argv[1:], budget=8.0)))\n"
    )
    silent = Terminal([sys.executable, "-c", script, *move[1:], "--kubeconfig", kubeconfig])
    code, out, err = await silent.run(answer=None)
    assert (code, out, err.splitlines()[-1]) == (1, "", f"error: {core.DEADLINE}"), err
    # The budget counts from before the reads, so the prompt gives up within it.
    assert silent.exited - silent.prompted < 8.0 + 3.0
    assert await requests(world) == {}

    # Step 2: the real request, answered y at the prompt.
    code, out, err = await Terminal(kubectl_argv).run()
    assert code == 0, err
    shown = result(out)
    request_id = shown["request-id"]
    assert (shown["dry-run"], shown["accepted"], shown["applied"]) == ("none", "Yes", "Yes")
    assert shown["message"] == "API accepted annotation request; delivery and converg..."
    assert shown["target"] == f"InferenceService/{ns}/{SERVICE}"
    assert preview(err)["Request UUID"] == request_id
    stored = await requests(world)
    value = json.loads(stored[f"ome.io/migration-request-v1-{request_id}"])
    assert list(value) == [
        "schemaVersion",
        "component",
        "instance",
        "from_node",
        "reason",
        "requested_at",
        "requested_by",
    ]
    assert (value["instance"], value["from_node"], value["reason"]) == (3, node, REASON)

    # The lookup: the request still waits (no manager leads), nothing is replayed.
    code, out, err = await kubectl(control_plane, kubeconfig, *move, "--request-id", request_id)
    assert code == 0, err
    assert result(out)["message"] == "Identical retained mailbox observed; no replay sent; ..."
    assert "Migration mode" not in preview(err)
    assert list(await requests(world)) == [f"ome.io/migration-request-v1-{request_id}"]
    # The same ID with another reason is not the same request.
    code, _, err = await kubectl(
        control_plane, kubeconfig, *base, "--instance=3", "--reason=x", "--request-id", request_id
    )
    assert (code, err.splitlines()[-1]) == (3, f"error: {core.PRECONDITION}")

    # OME takes the request: Instance 3 moves to Instance 4.
    world.sampler.arm()
    await release_lease(world)

    # Step 3: wait for its end, through the real kubectl; 0 at Completed.
    wait = ["ome", "wait", SERVICE, "-n", ns, "--for=migration=terminal"]
    code, out, err = await kubectl(
        control_plane, kubeconfig, *wait, f"--request-id={request_id}", "--timeout=3m"
    )
    assert (code, out) == (
        0,
        f"inferenceservice.ome.io/{SERVICE} migration={request_id} terminal (Completed; "
        "component engine)\n",
    ), err
    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "ome",
        "migration",
        "status",
        SERVICE,
        "-n",
        ns,
        "--component",
        "engine",
    )
    assert (code, out) == (
        0,
        "SUBJECT/COMP      STATUS                       DETAIL\n"
        f"{request_id[:8]}/engine   Completed/Terminal/Current   MSG: migrated to instan...\n",
    ), err
    # A request nobody sent never ends: unmet, exit 2, at the timeout.
    code, out, err = await kubectl(
        control_plane, kubeconfig, *wait, f"--request-id={UNKNOWN}", "--timeout=0s"
    )
    assert (code, out, err) == (
        2,
        "",
        f"error: timed out waiting for migration={UNKNOWN}=terminal on "
        f"inferenceservice.ome.io/{SERVICE} after 0s (phase NotRecorded)\n",
    )
    status = (await world.replica()).get("status") or {}
    (record,) = [r for r in status["migrations"] if r["requestUUID"] == request_id]
    assert (record["phase"], record["message"]) == ("Completed", "migrated to instance=4")
    await eventually(lambda: world.serving([0, 1, 2, 4]), timeout=60, what="0, 1, 2 and 4")
    assert world.sampler.low == 4, f"ready endpoints dipped to {world.sampler.low}"
    # Taken: the lookup misses.
    code, _, err = await kubectl(control_plane, kubeconfig, *move, "--request-id", request_id)
    assert (code, err.splitlines()[-1]) == (3, f"error: {core.PRECONDITION}")

    # Step 4: history, as a user with only the rights the docs name: the record in status
    # (AUTH) and the ledger's row of the same request (AUDIT).
    async with read_only_kubeconfig(
        world.kube, control_plane, ns, tmp_path, rules=HISTORY_RULES, account="history-reader"
    ) as reader:
        await check_history(world, control_plane, reader, request_id, record)


async def check_history(
    world: World,  # noqa: F811
    control_plane: Any,
    reader: str,
    request_id: str,
    record: dict[str, Any],
) -> None:
    ns = world.namespace
    history = ["ome", "migration", "history", SERVICE, "-n", ns]
    audit = await world.kube.get(CONFIGMAPS, ledger.ledger_name(SERVICE), ns)
    (row,) = [
        r
        for r in ledger.read_entries(audit["data"])
        if r["requestUUID"] == request_id and r.get("reason") == REASON
    ]
    assert (row["phase"], row["outcome"], row["surgeInstance"]) == ("Completed", "migrated", 4)

    def when(stamp: str) -> str:
        return f"{stamp[5:16]}Z"  # 2026-09-28T10:31:40Z -> 09-28T10:31Z

    code, out, err = await kubectl(control_plane, reader, *history)
    assert (code, out) == (
        0,
        "EVID    REQUEST/COMP   PHASE/STATE   WHEN           DETAIL\n"
        f"AUTH    {request_id[:8]}/E     Completed/T   {when(record['completedAt'])}   "
        "migrated to insta...\n"
        f"AUDIT   {request_id[:8]}/E     Completed/T   {when(row['completedAt'])}   migrated\n",
    ), err
    code, out, err = await kubectl(control_plane, reader, *history, "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["kind"] == "MigrationHistoryReport"
    assert [
        (r["evidence"], r["requestID"], r["outcome"]) for r in report["content"]["records"]
    ] == [
        ("Authoritative", request_id, "Completed"),
        ("AuditHistory", request_id, "Completed"),
    ]
    assert [s["availability"] for s in report["sources"]] == ["Available"] * 3
    assert REASON not in out
    code, out, err = await kubectl(control_plane, reader, *history, "-o", "wide")
    assert code == 0, err
    assert out.splitlines()[0].split()[:4] == ["EVIDENCE", "AVAILABILITY", "WINDOW", "SOURCE"]

    # A ledger document that isn't the ledger's shape fails closed: its issue, no AUDIT row,
    # the AUTH row still shown.
    audit["data"][ledger.DATA_KEY] = '{"entries": {"not": "a list"}}'
    await world.kube.replace(CONFIGMAPS, audit, ns)
    code, out, err = await kubectl(control_plane, reader, *history)
    assert (code, out.splitlines()[1:]) == (
        0,
        [
            f"AUTH     {request_id[:8]}/E     Completed/T   {when(record['completedAt'])}   "
            "migrated to insta...",
            "REPORT   -/-            Partial/?     -              AuditMalformed",
        ],
    ), err
