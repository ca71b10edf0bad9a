"""release-held's prompt never outlives the command's budget, whatever stdin does: the plugin
as a real process against the real API server.

The command runs as a process (``python -c``, the plugin's ``run`` with a budget of a few
seconds instead of 45) with the admin kubeconfig of the session's control plane. The test
creates what it reads with the admin client, as OME would have left it: an InferenceService
``chat`` and its InferenceReplica ``chat-engine`` whose status (written through the status
subresource) holds a Held retry block, so every check passes and the prompt waits. No manager
runs and the chart's webhooks are not installed, so nothing changes the objects meanwhile.
Its stdin is a pipe held open and silent, a pipe that trickles ``y`` without a newline, or a
terminal nobody types at: each time the process must print the out-of-time error and exit 1
within the budget, and the InferenceReplica must be as it was. A slow answer typed in pieces
still confirms, and the release annotation lands on the real InferenceReplica.
A process is the only honest witness: what hung was the interpreter's exit, which waited
for a thread still blocked reading stdin after the prompt had given up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from omed.api.constants import ANNOTATION_CONTROLLER_WRITE, ANNOTATION_RELEASE_HELD_REVISION
from omed.cli import release_held
from omed.kube.client import KubeClient
from omed.kube.resources import INFERENCE_REPLICAS
from omed.statuscodec import timestamps

pytestmark = pytest.mark.integration

NOW = timestamps.parse("2026-09-14T21:00:00Z") or 0
"""The clock the command judges the block's times against (after its lastFailureAt)."""
REVISION = "chat-engine-7f9c4d2b"
BUDGET = 3.0
SLACK = 1.5
"""What the process may take past its budget to exit (closing the client and the loop)."""
SCRIPT = (
    "import asyncio, sys\n"
    "from omed.cli.kubectl_ome import run\n"
    "sys.exit(asyncio.run(run(sys.argv[3:], now=float(sys.argv[1]), budget=float(sys.argv[2]))))\n"
)
ARGV = ("instance", "release-held", "chat", "--component=engine", "--revision=7f9c4d2b")
PROMPT = b"Release this held revision? [y/N]: "
HELD = {
    "targetRevision": REVISION,
    "state": "Held",
    "attemptsStarted": 3,
    "firstFailureAt": "2026-09-14T20:40:00Z",
    "lastFailureAt": "2026-09-14T20:52:31Z",
    "reason": "ImagePullBackOff",
}


@dataclass(frozen=True)
class Held:
    """What the test created: where, and the InferenceReplica as its status write left it."""

    kubeconfig: str
    namespace: str
    replica: dict[str, Any]


@pytest.fixture
async def held(kube: KubeClient, kubeconfig: str, namespace: str, chat: Any) -> Held:
    """InferenceService ``chat`` and its engine's InferenceReplica with a releasable Held
    block: what OME writes (parentRef, label, controller owner reference to the
    InferenceService's uid, ``ome.io/controller-write``, a status observed at the replica's
    generation). The spec carries the ``replicas`` and ``runners`` the CRD requires."""
    service = await chat.service()
    created = await kube.create(
        INFERENCE_REPLICAS,
        chat.replica(
            "chat-engine",
            service["metadata"]["uid"],
            annotations={ANNOTATION_CONTROLLER_WRITE: "true"},
        ),
        namespace,
    )
    status = {"observedGeneration": created["metadata"]["generation"], "retryBlocks": [HELD]}
    written = await kube.patch(
        INFERENCE_REPLICAS, "chat-engine", {"status": status}, namespace, subresource="status"
    )
    assert written["status"]["retryBlocks"] == [HELD]
    return Held(kubeconfig=kubeconfig, namespace=namespace, replica=written)


class Run:
    """The plugin as a process: its exit code, its stderr, when its prompt appeared and when
    it exited (monotonic seconds)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.err = b""
        self.prompted: float | None = None
        self.prompt_shown = asyncio.Event()
        self.exited: float | None = None

    async def watch(self, *, limit: float) -> None:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + limit
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                await self.proc.wait()
                raise AssertionError(
                    f"still running {limit:.0f} s after it started; stderr so far: {self.err!r}"
                )
            try:
                chunk = await asyncio.wait_for(self.proc.stderr.read(4096), timeout=left)
            except TimeoutError:
                continue
            if not chunk:
                break
            self.err += chunk
            if self.prompted is None and PROMPT in self.err:
                self.prompted = time.monotonic()
                self.prompt_shown.set()
        try:
            await asyncio.wait_for(self.proc.wait(), timeout=max(deadline - time.monotonic(), 0))
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(
                f"closed stderr but still running {limit:.0f} s after it started"
            ) from None
        self.exited = time.monotonic()


async def start(target: Held, *args: str, stdin: Any, budget: float = BUDGET) -> Run:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SCRIPT,
        str(NOW),
        str(budget),
        *ARGV,
        *args,
        f"--namespace={target.namespace}",
        f"--kubeconfig={target.kubeconfig}",
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Run(proc)


def out_of_time(budget: float) -> bytes:
    return (
        f"error: release-held ran out of its {budget:g} s; nothing changed. Run kubectl ome "
        "instance retry-blocks before you try again\n"
    ).encode()


async def silent(write: Callable[[bytes], None]) -> None:
    await asyncio.Event().wait()


async def trickle(write: Callable[[bytes], None]) -> None:
    while True:
        write(b"y")
        await asyncio.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("typing", [silent, trickle], ids=["silent", "trickle-no-newline"])
@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "tty"])
async def test_a_prompt_nobody_answers_ends_within_the_budget(
    held: Held, kube: KubeClient, typing: Callable[..., Any], terminal: bool
) -> None:
    if terminal:
        writer_fd, reader_fd = os.openpty()
        run = await start(held, stdin=reader_fd)
        os.close(reader_fd)

        def write(data: bytes) -> None:
            os.write(writer_fd, data)

    else:
        run = await start(held, stdin=asyncio.subprocess.PIPE)
        assert run.proc.stdin is not None
        write = run.proc.stdin.write
    typist = asyncio.create_task(typing(write))
    try:
        await run.watch(limit=BUDGET + 20)
    finally:
        typist.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await typist
        if terminal:
            os.close(writer_fd)
        elif run.proc.stdin is not None:
            run.proc.stdin.close()  # held open until the process was gone
    assert run.proc.returncode == 1, run.err
    assert run.err.endswith(PROMPT + b"\n" + out_of_time(BUDGET)), run.err
    assert run.prompted is not None and run.exited is not None
    assert run.exited - run.prompted <= BUDGET + SLACK, run.err
    # "nothing changed": the InferenceReplica is the version the status write left.
    current = await kube.get(INFERENCE_REPLICAS, "chat-engine", held.namespace)
    assert current["metadata"]["resourceVersion"] == held.replica["metadata"]["resourceVersion"]
    assert ANNOTATION_RELEASE_HELD_REVISION not in current["metadata"]["annotations"]


@pytest.mark.slow
async def test_an_answer_still_confirms_and_the_release_lands(held: Held, kube: KubeClient) -> None:
    """The prompt reads a slow answer typed in pieces, then the release goes on: the API
    server stores the annotation on the InferenceReplica the checks read."""
    run = await start(held, stdin=asyncio.subprocess.PIPE)
    assert run.proc.stdin is not None
    stdin = run.proc.stdin

    async def answer() -> None:
        await run.prompt_shown.wait()
        await asyncio.sleep(0.3)
        stdin.write(b"y")
        await asyncio.sleep(0.3)
        stdin.write(b"es\n")

    typist = asyncio.create_task(answer())
    try:
        await run.watch(limit=BUDGET + 20)
    finally:
        if not typist.done():
            typist.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await typist
        stdin.close()
    assert run.proc.returncode == 0, run.err
    assert run.err.endswith(PROMPT), run.err
    assert run.proc.stdout is not None
    out = (await run.proc.stdout.read()).decode()
    assert release_held.MESSAGE_APPLIED[: release_held.VALUE_WIDTH] in out, out
    current = await kube.get(INFERENCE_REPLICAS, "chat-engine", held.namespace)
    assert current["metadata"]["annotations"] == {
        ANNOTATION_CONTROLLER_WRITE: "true",
        ANNOTATION_RELEASE_HELD_REVISION: REVISION,
    }
    assert current["metadata"]["resourceVersion"] != held.replica["metadata"]["resourceVersion"]
    assert current["status"] == held.replica["status"]  # the patch touched metadata only
