"""The webhook server against clients that don't play fair, in a memory-limited process.

The server runs in a child process, on the manager's loop (uvloop), with a memory limit of
1 GiB enforced as the kernel enforces a pod's: this test plays the OOM killer, reading the
child's RSS every 20 ms and killing it when it passes the limit. (``RLIMIT_AS`` alone, at
2 GiB here as a backstop for the shared machine, isn't the same fault: Python turns a
refused allocation into ``MemoryError``, which a server can catch and answer 400, so it
"survives" at the limit; a pod over its limit gets no such chance.) Another process
attacks it over real TLS, at the lowest CPU priority (on a small test machine the attack
would otherwise take the CPU the server needs; in a cluster it runs elsewhere):

* 200 uploaders from 127.0.0.1, each declaring a body just under 7 MiB, sending all of it
  but the last bytes at up to 1 MiB/s and then stalling; whenever the server answers or
  hangs up they start again;
* 1,000 idle connections from 127.0.0.3: half finished the TLS handshake and send nothing,
  half never start it; closed ones are opened again at once.

Meanwhile this process, from 127.0.0.2 as the API server would come from its own address,
sends a valid AdmissionReview on a fresh connection every 0.2 s. Without bounds, the
buffered bodies pass 1 GiB within seconds and the server is killed. With them, every
review is answered, each within 1 s, and the server is still up after.

No API server is needed: the clients are the subject. The test prints the latencies, the
child's peak RSS (``VmHWM``) and what the uploaders were answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import ssl
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import pytest

from omed_devcluster.certs import CertificateAuthority

pytestmark = pytest.mark.slow

MEMORY_LIMIT = 1024 * 1024 * 1024
"""The child's RSS limit: above it, the test kills it as the OOM killer would."""
ADDRESS_SPACE = 2 * MEMORY_LIMIT
"""The child's RLIMIT_AS: only a backstop."""
UPLOADERS = 200
IDLE = 1000
BODY = 7 * 1024 * 1024 - 4096
"""What each uploader declares: under the 7 MiB cap, so only the bounds can stop it."""
WITHHELD = 16
"""The bytes an uploader never sends."""
CHUNK = 64 * 1024
UPLOAD_RATE = 1024 * 1024
"""Bytes per second per uploader."""
ATTACK = 16.0
"""Seconds the attack lasts; the reviews are sent over all of it."""
PROBE_EVERY = 0.2
ANSWER_WITHIN = 1.0
PATH = "/validate-ome-io-v1beta1-inferenceservice"
UPLOADER_ADDRESS = "127.0.0.1"
IDLE_ADDRESS = "127.0.0.3"
REVIEWER_ADDRESS = "127.0.0.2"
"""The reviews' source address. The API server's requests come from its own address, not
from an attacker's."""

CHILD = """
import asyncio, logging, sys
from pathlib import Path
from omed.webhooks import InferenceServiceValidator, WebhookServer

async def main():
    server = WebhookServer(
        handlers=[InferenceServiceValidator()], port=0, host="127.0.0.1",
        cert_dir=Path(sys.argv[1]),
    )
    await server.start()
    print(server.port, flush=True)
    await asyncio.Event().wait()

logging.basicConfig(level=logging.WARNING)
try:  # the loop the manager runs on (omed.__main__)
    import uvloop
except ImportError:
    asyncio.run(main())
else:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
"""

ISVC = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "prod"},
    "spec": {
        "model": {"name": "llama-3-2-1b-instruct"},
        "runtime": {"name": "srt-llama-3-2-1b-instruct"},
        "engine": {"minReplicas": 1, "maxReplicas": 1},
    },
}


def review(uid: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "ome.io", "version": "v1beta1", "kind": "InferenceService"},
                "operation": "CREATE",
                "object": ISVC,
            },
        }
    )


def client_context(authority: CertificateAuthority) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=authority.cert_pem.decode())


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as status:
        return dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)


@dataclass
class Child:
    process: asyncio.subprocess.Process
    port: int
    stderr: Path
    killed_at: int | None = None
    """The RSS (bytes) the child was killed at, when it passed MEMORY_LIMIT."""

    def alive(self) -> bool:
        return self.process.returncode is None

    def peak_rss(self) -> int:
        return int(_status(self.process.pid)["VmHWM"].split()[0]) * 1024

    async def oom_killer(self) -> None:
        """Kill the child when its RSS passes MEMORY_LIMIT, as a cgroup's limit would."""
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            while self.alive():
                rss = int(_status(self.process.pid)["VmRSS"].split()[0]) * 1024
                if rss > MEMORY_LIMIT:
                    self.killed_at = rss
                    self.process.kill()
                    return
                await asyncio.sleep(0.02)


@pytest.fixture
async def child(tmp_path: Path) -> AsyncIterator[tuple[Child, CertificateAuthority]]:
    """The server in a memory-limited process, on the manager's loop (uvloop)."""
    authority = CertificateAuthority.create("slow-clients-ca")
    pair = authority.issue(
        common_name="omed-webhook", ip_addresses=["127.0.0.1"], dns_names=[], server=True
    )
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    (cert_dir / "tls.crt").write_bytes(pair.cert_pem)
    (cert_dir / "tls.key").write_bytes(pair.key_pem)
    stderr = tmp_path / "server.stderr"
    with stderr.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHILD,
            str(cert_dir),
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            preexec_fn=_limit_child,
            cwd=tmp_path,  # not the checkout: sys.path, not the directory, picks omed
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert process.stdout is not None
    watchdog: asyncio.Task[None] | None = None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 30)
        assert line, stderr.read_text()
        server = Child(process, int(line), stderr)
        watchdog = asyncio.create_task(server.oom_killer())
        yield server, authority
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if process.returncode is None:
            process.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 10)
        if process.returncode is None:
            process.kill()
            await process.wait()


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)
    sent: int = 0


def _retrieve(future: asyncio.Future[bytes]) -> None:
    """Take a dropped connection's error off a read the uploader may not await."""
    if not future.cancelled():
        future.exception()


async def _upload(port: int, context: ssl.SSLContext, stop: asyncio.Event, tally: Tally) -> None:
    """One uploader: declare BODY bytes, send all but WITHHELD slowly, stall; again."""
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {BODY}\r\n\r\n"
    ).encode()
    chunk = b" " * CHUNK
    while not stop.is_set():
        writer = None
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=context, local_addr=(UPLOADER_ADDRESS, 0)
            )
            writer.write(head)
            answer = asyncio.ensure_future(reader.readline())
            answer.add_done_callback(_retrieve)
            sent = 0
            while sent < BODY - WITHHELD and not answer.done() and not stop.is_set():
                size = min(CHUNK, BODY - WITHHELD - sent)
                writer.write(chunk[:size])
                sent += size
                tally.sent += size
                await writer.drain()
                await asyncio.wait([answer], timeout=size / UPLOAD_RATE)
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait([answer, stopped], return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            status = answer.result().split(b" ")[1:2] if answer.done() else []
            answer.cancel()
            tally.answers[status[0].decode() if status else "closed"] += 1
        except (OSError, asyncio.IncompleteReadError, IndexError):
            tally.answers["closed"] += 1
        finally:
            if writer is not None:
                writer.transport.abort()
        await asyncio.sleep(0.05)


async def _idle(port: int, context: ssl.SSLContext | None, stop: asyncio.Event) -> None:
    """One idle connection (TLS done, or never started), opened again when it's closed."""
    while not stop.is_set():
        writer = None
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=context, local_addr=(IDLE_ADDRESS, 0)
            )
            read = asyncio.ensure_future(reader.read(1))
            read.add_done_callback(_retrieve)
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait([read, stopped], return_when=asyncio.FIRST_COMPLETED)
            read.cancel()
            stopped.cancel()
        except OSError:
            await asyncio.sleep(0.2)
        finally:
            if writer is not None:
                writer.transport.abort()


async def attack(port: int, ca_file: str, seconds: float) -> Tally:
    """UPLOADERS uploaders and IDLE idle connections against ``port`` for ``seconds``."""
    context = ssl.create_default_context(cafile=ca_file)
    stop = asyncio.Event()
    tally = Tally()
    tasks = [asyncio.create_task(_upload(port, context, stop, tally)) for _ in range(UPLOADERS)]
    tasks += [
        asyncio.create_task(_idle(port, context if i % 2 else None, stop)) for i in range(IDLE)
    ]
    await asyncio.sleep(seconds)
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return tally


async def _probe(port: int, context: ssl.SSLContext, uid: str) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                ssl=context, force_close=True, local_addr=(REVIEWER_ADDRESS, 0)
            ),
            timeout=aiohttp.ClientTimeout(total=10),
        ) as session,
        session.post(
            f"https://127.0.0.1:{port}{PATH}?timeout=10s",
            data=review(uid),
            headers={"Content-Type": "application/json"},
        ) as response,
    ):
        return response.status, await response.read()


@dataclass
class Probes:
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


async def _probes(port: int, context: ssl.SSLContext, stop: asyncio.Event, tally: Probes) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        uid = f"probe-{n}"
        started = time.perf_counter()
        try:
            status, body = await _probe(port, context, uid)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            tally.failures.append(f"{uid}: {type(exc).__name__}: {exc}")
        else:
            took = time.perf_counter() - started
            tally.latencies.append(took)
            if status != 200:
                tally.failures.append(f"{uid}: HTTP {status} {body[:200]!r}")
            elif orjson.loads(body)["response"] != {"uid": uid, "allowed": True}:
                tally.failures.append(f"{uid}: {body[:200]!r}")
            elif took > ANSWER_WITHIN:
                tally.failures.append(f"{uid}: answered after {took:.2f} s")
        await asyncio.sleep(PROBE_EVERY)


def _limit_attacker() -> None:
    # The attacker's CPU is its own, elsewhere in the cluster; on a small test machine it
    # shares the server's, so it gets only what the server leaves.
    os.nice(19)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))


async def test_slow_uploads_and_idle_connections_dont_stop_admissions(
    child: tuple[Child, CertificateAuthority], tmp_path: Path
) -> None:
    server, authority = child
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 4 * (UPLOADERS + IDLE):
        pytest.skip(f"the attack needs {4 * (UPLOADERS + IDLE)} descriptors; the limit is {hard}")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(authority.cert_pem)
    # The attack runs in a process of its own, so that its work doesn't delay the reviews'
    # client here and count as the server's latency.
    attacker = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        str(server.port),
        str(ca_file),
        str(ATTACK + 1.0),
        stdout=asyncio.subprocess.PIPE,
        preexec_fn=_limit_attacker,
    )
    try:
        await asyncio.sleep(1.0)  # the attack is on before the first review
        context = client_context(authority)
        stop = asyncio.Event()
        probes = Probes()
        prober = asyncio.create_task(_probes(server.port, context, stop, probes))
        await asyncio.sleep(ATTACK)
        stop.set()
        await prober
        # At nice 19 the attacker winds down only when the machine lets it: generous.
        out, _ = await asyncio.wait_for(attacker.communicate(), 120)
    finally:
        if attacker.returncode is None:
            attacker.kill()
            await attacker.wait()
    assert attacker.returncode == 0
    attack = orjson.loads(out)

    await asyncio.sleep(0.05)  # the OOM killer's last look
    alive = server.alive()
    peak = server.peak_rss() if alive else server.killed_at or 0
    latencies = sorted(probes.latencies)
    print(
        f"\nreviews: {len(latencies)} answered, {len(probes.failures)} failed;",
        f"latency p50 {latencies[len(latencies) // 2] * 1000:.0f} ms,"
        f" p90 {latencies[len(latencies) * 9 // 10] * 1000:.0f} ms,"
        f" max {latencies[-1] * 1000:.0f} ms;"
        if latencies
        else "",
        f"server peak RSS {peak / 2**20:.0f} MiB; uploaders sent"
        f" {attack['sent'] / 2**20 / ATTACK:.0f} MiB/s and were answered {attack['answers']}",
    )
    assert server.killed_at is None, f"over the memory limit: RSS {server.killed_at} bytes"
    assert alive, f"the server died: {server.stderr.read_text()[-3000:]}"
    assert not probes.failures, probes.failures[:10]
    assert len(latencies) >= ATTACK / (PROBE_EVERY + ANSWER_WITHIN)
    # After the attack, the server still answers.
    status, body = await _probe(server.port, context, "after")
    assert status == 200 and orjson.loads(body)["response"]["allowed"] is True


if __name__ == "__main__":  # the attacker: PORT CA_FILE SECONDS; prints its tally
    tally = asyncio.run(attack(int(sys.argv[1]), sys.argv[2], float(sys.argv[3])))
    sys.stdout.buffer.write(orjson.dumps({"answers": tally.answers, "sent": tally.sent}))
