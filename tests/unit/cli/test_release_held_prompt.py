"""release-held's prompt never outlives the command's budget, whatever stdin does.

The command runs as a real process (``python -c``, the plugin's ``run`` with a budget of a few
seconds instead of 45) against a small fake API server that serves one InferenceService with
a releasable Held block, so every check passes and the prompt waits. Its stdin is a pipe held
open and silent, a pipe that trickles ``y`` without a newline, or a terminal nobody types
at: each time the process must print the out-of-time error and exit 1 within the budget.
A process is the only honest witness: what hung was the interpreter's exit, which waited
for a thread still blocked reading stdin after the prompt had given up.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import orjson
import pytest
import yaml
from aiohttp import web

from omed.cli import kubectl_ome, release_held

from .test_instances import isvc
from .test_release_held import NOW, engine

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


@pytest.fixture
async def server() -> AsyncIterator[int]:
    """The API server's two reads: the InferenceService and its InferenceReplicas."""

    async def service(request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(isvc()), content_type="application/json")

    async def replicas(request: web.Request) -> web.Response:
        body = {"kind": "InferenceReplicaList", "metadata": {}, "items": [engine()]}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    app = web.Application()
    base = "/apis/ome.io/v1beta1/namespaces/prod"
    app.router.add_get(f"{base}/inferenceservices/chat", service)
    app.router.add_get(f"{base}/inferencereplicas", replicas)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port
    finally:
        await runner.cleanup()


def write_kubeconfig(tmp_path: Path, port: int) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "prod"}}
        ],
        "current-context": "main",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(document))
    return path


class Run:
    """The plugin as a process: its exit code, its stderr, when its prompt appeared and when
    it exited (monotonic seconds)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.err = b""
        self.prompted: float | None = None
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
        try:
            await asyncio.wait_for(self.proc.wait(), timeout=max(deadline - time.monotonic(), 0))
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(
                f"closed stderr but still running {limit:.0f} s after it started"
            ) from None
        self.exited = time.monotonic()


async def start(kubeconfig: Path, *args: str, stdin: Any, budget: float = BUDGET) -> Run:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SCRIPT,
        str(NOW),
        str(budget),
        *ARGV,
        *args,
        f"--kubeconfig={kubeconfig}",
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
    server: int, tmp_path: Path, typing: Callable[..., Any], terminal: bool
) -> None:
    kubeconfig = write_kubeconfig(tmp_path, server)
    if terminal:
        writer_fd, reader_fd = os.openpty()
        run = await start(kubeconfig, stdin=reader_fd)
        os.close(reader_fd)

        def write(data: bytes) -> None:
            os.write(writer_fd, data)

    else:
        run = await start(kubeconfig, stdin=asyncio.subprocess.PIPE)
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


@pytest.mark.slow
async def test_an_answer_still_confirms(server: int, tmp_path: Path) -> None:
    """The prompt reads a slow answer typed in pieces, then the release goes on."""
    run = await start(
        write_kubeconfig(tmp_path, server), "--dry-run=client", stdin=asyncio.subprocess.PIPE
    )
    assert run.proc.stdin is not None
    stdin = run.proc.stdin

    async def answer() -> None:
        await asyncio.sleep(0.5)
        stdin.write(b"y")
        await asyncio.sleep(0.3)
        stdin.write(b"es\n")

    typist = asyncio.create_task(answer())
    await run.watch(limit=BUDGET + 20)
    await typist
    stdin.close()
    assert run.proc.returncode == 0, run.err
    assert run.err.endswith(PROMPT), run.err
    assert run.proc.stdout is not None
    assert b"Validated locally; no patch sent." in await run.proc.stdout.read()


def test_the_budget_is_45_seconds_by_default() -> None:
    assert release_held.BUDGET_SECONDS == 45.0
    assert inspect.signature(kubectl_ome.run).parameters["budget"].default == 45.0
    assert kubectl_ome.out_of_time(45.0) == out_of_time(45.0).decode()[len("error: ") : -1]


# read_line itself, in-process: no thread is left behind, so these can't hang the session.


@contextlib.contextmanager
def pipe() -> Iterator[tuple[TextIO, int]]:
    """A pipe's read end as a text stream, and its write end's descriptor."""
    reader, writer = os.pipe()
    stream = os.fdopen(reader, "r", encoding="utf-8")
    try:
        yield stream, writer
    finally:
        stream.close()
        with contextlib.suppress(OSError):
            os.close(writer)


async def test_read_line_gives_up_on_a_silent_pipe_or_a_line_without_its_end() -> None:
    threads = threading.active_count()
    with pipe() as (stream, writer):
        assert await kubectl_ome.read_line(stream, timeout=0.05) is None
        os.write(writer, b"ye")
        assert await kubectl_ome.read_line(stream, timeout=0.05) is None
    assert threading.active_count() == threads


async def test_read_line_reads_a_line_in_pieces_or_up_to_the_end_of_input() -> None:
    with pipe() as (stream, writer):
        reading = asyncio.create_task(kubectl_ome.read_line(stream, timeout=5))
        os.write(writer, b"y")
        await asyncio.sleep(0.01)
        os.write(writer, "es \u00e9\nmore\n".encode())
        assert await reading == "yes \u00e9"
    with pipe() as (stream, writer):
        os.write(writer, b"y")
        os.close(writer)
        assert await kubectl_ome.read_line(stream, timeout=5) == "y"
    with pipe() as (stream, writer):
        os.close(writer)
        assert await kubectl_ome.read_line(stream, timeout=5) == ""


async def test_read_line_reads_what_never_blocks_directly(tmp_path: Path) -> None:
    assert await kubectl_ome.read_line(io.StringIO("yes\n"), timeout=0) == "yes\n"
    answers = tmp_path / "answers"
    answers.write_text("y\n")
    with answers.open() as stream:  # epoll refuses regular files
        assert await kubectl_ome.read_line(stream, timeout=0) == "y\n"
    devnull = tmp_path.parent / os.devnull  # an absolute path: this is /dev/null
    with devnull.open() as stream:
        assert await kubectl_ome.read_line(stream, timeout=0) == ""
