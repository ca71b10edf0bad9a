"""Latency of the InferenceService validating webhook at fixed request rates; print JSON.

    .venv/bin/python bench/webhook.py [--rates 500,1000] [--duration 10] [--connections 2]
        [--client go|go-nethttp|raw|aiohttp] [--repeat 3] [--baseline DIR]

For each server, a separate process serves HTTPS on loopback (a throwaway CA, EC P-256),
and a client sends AdmissionReview v1 requests for an InferenceService CREATE at each
fixed rate, open loop: request ``i`` is due at ``start + i / rate`` whatever happened to the
ones before, over a few keep-alive connections, as the API server does. Latency is
counted from the due time to the end of the response, so a server that falls behind pays
for its queue (no coordinated omission).

The client (``--client``): ``go`` (the default) is ``bench/loadgen``, a small Go program
(standard library only, built here with ``go build`` into the omed cache on first use), a
compiled client like the API server itself, whose own pauses stay out of the figures on a
2-CPU machine, pacing its sends with the kernel's timer (``nanosleep`` on a thread of its own:
Go's ``time.Sleep`` woke 0.55 ms late at the median here, and that lateness counted as
latency); each result gives the client's own lateness (``client_lateness_p50_ms``, ``_p99_ms``:
from the due time to the start of the send) so that what the server adds can be read apart.
It sends over each keep-alive connection from one goroutine that writes a request whole and
reads its answer (``-mode conn``, 0.18 ms of CPU a request here); ``go-nethttp`` is the same
program through net/http's client (a goroutine per request, handed between the transport's
read and write goroutines: 0.32 ms of CPU and 12 context switches a request, on the two CPUs
the server under test shares), the client of the figures before the sixth session. ``raw``
(prebuilt HTTP/1.1 requests on asyncio streams) and ``aiohttp`` are Python clients in this
process, kept to compare with earlier figures. ``--repeat N`` runs
the whole bare/full comparison N times, alternating the servers, and reports each run and
the median of each figure: a few pauses of this VM decide a single run's p99.

The servers:

* ``bare``: an aiohttp TLS handler that only parses the review and answers allowed: the
  floor that HTTP, TLS and JSON set on this machine;
* ``full``: the manager's own webhook server, built as ``omed --webhook`` builds it
  (:func:`omed.manager.webhooks.build_webhook_server` from the parsed flags, all three
  webhooks, the manager's log setup), only on a free port: body checks, metrics, every rule,
  the model parse, ratcheting.

Both run on uvloop when it is installed, on the event loop that ``omed`` itself makes
(``asyncio.Runner(loop_factory=uvloop.new_event_loop)``), and, as
:func:`omed.manager.process.run` does before the manager runs, freeze what startup made
out of the collector's way (``gc.collect(); gc.freeze()``).

``--baseline DIR`` adds a third server, ``baseline``: the full server of another checkout
(``git worktree add DIR <commit>``), run from DIR's own code in the same alternating rounds,
so that a change is compared with the code before it on the same minutes of this machine.

Goals: ``full`` p99 within 2x of ``bare`` and under 3 ms at 1,000 requests/s. Each result
also gives the server process's CPU time per request (``/proc``), which a busy machine
inflates less than it inflates latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import os
import platform
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ISVC_PATH = "/validate-ome-io-v1beta1-inferenceservice"
REQUEST_UUID = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

OBJECT: dict[str, Any] = {
    "apiVersion": "ome.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {
        "name": "chat",
        "namespace": "prod",
        "uid": "5f0c8a52-3b1e-4c8d-9f27-6a1d0e4b7c93",
        "generation": 1,
        "creationTimestamp": "2026-09-28T10:12:04Z",
        "labels": {"team": "serving", "app": "chat"},
        "annotations": {
            "ome.io/deploymentMode": "OMENative",
            f"ome.io/migration-request-v1-{REQUEST_UUID}": orjson.dumps(
                {  # upstream's wire format: the request's UUID is in the key
                    "schemaVersion": "v1",
                    "component": "engine",
                    "instance": 3,
                    "from_node": "node-a",
                    "hint_target_nodes": ["node-b", "node-c"],
                    "reason": "node-a maintenance",
                    "requested_at": "2026-09-28T10:12:04Z",
                    "requested_by": "kubectl-ome",
                }
            ).decode(),
        },
        "managedFields": [
            {
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "apiVersion": "ome.io/v1beta1",
                "time": "2026-09-28T10:12:04Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:engine": {".": {}, "f:minReplicas": {}}}},
            }
        ],
    },
    "spec": {
        "deploymentMode": "OMENative",
        "model": {"name": "llama-3-2-1b-instruct"},
        "runtime": {"name": "srt-llama-3-2-1b-instruct-pd"},
        "engine": {
            "minReplicas": 4,
            "maxReplicas": 4,
            "runner": {
                "name": "ome-container",
                "image": "serve:1.3.0",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                "env": [{"name": "MODEL_PATH", "value": "/mnt/models"}],
            },
            "lifecycle": {
                "updateStrategy": {
                    "type": "SurgeThenDrain",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                },
                "readyPolicy": "AllPodReady",
                "instanceReadyTimeout": "15m",
                "migrationPolicy": {"mode": "Auto"},
                "updateRetry": {"maxAttempts": 3, "initialDelay": "30s", "maxDelay": "10m"},
            },
        },
        "decoder": {
            "minReplicas": 2,
            "maxReplicas": 2,
            "leader": {"runner": {"name": "ome-container", "image": "serve:1.3.0"}},
            "worker": {"size": 1, "runner": {"name": "ome-container", "image": "serve:1.3.0"}},
            "lifecycle": {"migrationPolicy": {"mode": "Never"}},
        },
        "router": {"minReplicas": 1, "maxReplicas": 1},
    },
}


def review_body(uid: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "ome.io", "version": "v1beta1", "kind": "InferenceService"},
                "resource": {
                    "group": "ome.io",
                    "version": "v1beta1",
                    "resource": "inferenceservices",
                },
                "name": "chat",
                "namespace": "prod",
                "operation": "CREATE",
                "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
                "object": OBJECT,
                "oldObject": None,
                "dryRun": False,
            },
        }
    )


# -- Servers (run in a child process) -------------------------------------------------------


def install_uvloop() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def run_as_omed(coroutine: Any) -> Any:
    """Run ``coroutine`` on the loop ``omed`` runs on (``omed.__main__._run_loop``)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


async def serve_bare(cert_dir: Path) -> int:
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        review = orjson.loads(await request.read())
        answer = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    app = web.Application(client_max_size=7 * 1024 * 1024)
    app.router.add_post(ISVC_PATH, handle)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return int(runner.addresses[0][1])


async def serve_full(cert_dir: Path) -> int:
    """The manager's webhook server, as ``omed --webhook --webhook-cert-dir <dir>`` builds
    it in :func:`omed.manager.process.run`, on a free port instead of 9443."""
    import dataclasses

    from omed import log as omed_log
    from omed.clock import RealClock
    from omed.config import ConfigCache, parse_flags
    from omed.manager.startup import log_level
    from omed.manager.webhooks import build_webhook_server
    from omed.webhooks import FeatureGates

    options = parse_flags(["--webhook", f"--webhook-cert-dir={cert_dir}"], {})
    options = dataclasses.replace(options, webhook_port=0)  # the flag takes 1-65535
    omed_log.setup(encoder=options.zap_encoder, level=log_level(options.zap_log_level))

    async def no_configmap() -> dict[str, str]:
        return {}

    config = ConfigCache(fetch=no_configmap, ttl=options.config_cache_ttl, clock=RealClock())
    server = build_webhook_server(options=options, config=config, gates=FeatureGates())
    await server.start()
    return server.port


def serve(kind: str, cert_dir: Path) -> None:
    async def run() -> None:
        port = await (serve_bare if kind == "bare" else serve_full)(cert_dir)
        gc.collect()  # as omed.manager.process.run does once everything is built
        gc.freeze()
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until EOF

    run_as_omed(run())


# -- Client ----------------------------------------------------------------------------------


def percentile(sorted_values: list[float], q: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


class RawPool:
    """A few keep-alive HTTPS connections that send prebuilt HTTP/1.1 requests: a load
    generator far cheaper per request than aiohttp's client, for a box with few CPUs."""

    def __init__(self, *, port: int, context: ssl.SSLContext, connections: int) -> None:
        self.port = port
        self.context = context
        self.size = connections
        self.idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            asyncio.Queue()
        )

    async def open(self) -> None:
        for _ in range(self.size):
            self.idle.put_nowait(
                await asyncio.open_connection("127.0.0.1", self.port, ssl=self.context)
            )

    def request(self, body: bytes) -> bytes:
        head = (
            f"POST {ISVC_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    async def post(self, raw: bytes) -> tuple[int, bytes]:
        reader, writer = await self.idle.get()
        try:
            writer.write(raw)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            return status, await reader.readexactly(length)
        finally:
            self.idle.put_nowait((reader, writer))

    async def close(self) -> None:
        while not self.idle.empty():
            _, writer = self.idle.get_nowait()
            writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(
    *,
    port: int,
    pid: int,
    ca_pem: bytes,
    rate: float,
    duration: float,
    connections: int,
    client: str,
) -> dict[str, Any]:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    url = f"https://127.0.0.1:{port}{ISVC_PATH}"
    headers = {"Content-Type": "application/json"}
    bodies = [review_body(f"uid-{i}") for i in range(256)]
    latencies: list[float] = []
    failures = 0
    session: aiohttp.ClientSession | None = None
    pool: RawPool | None = None
    if client == "aiohttp":
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=connections)
        )
        payloads = bodies
    else:
        pool = RawPool(port=port, context=context, connections=connections)
        await pool.open()
        payloads = [pool.request(body) for body in bodies]

    async def send(payload: bytes) -> tuple[int, bytes]:
        if session is not None:
            async with session.post(url, data=payload, headers=headers) as response:
                return response.status, await response.read()
        assert pool is not None
        return await pool.post(payload)

    async def one(due: float, payload: bytes) -> None:
        nonlocal failures
        status, answer = await send(payload)
        if status != 200 or b'"allowed":true' not in answer:
            failures += 1
        latencies.append(time.perf_counter() - due)

    try:
        # Warm up: open the connections, fill caches.
        await asyncio.gather(*(one(time.perf_counter(), payloads[0]) for _ in range(200)))
        latencies.clear()
        failures = 0
        server_cpu_before = cpu_seconds(pid)
        total = int(rate * duration)
        tasks: list[asyncio.Task[None]] = []
        start = time.perf_counter() + 0.05
        for i in range(total):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(due, payloads[i % len(payloads)])))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        server_cpu = cpu_seconds(pid) - server_cpu_before
    finally:
        if session is not None:
            await session.close()
        if pool is not None:
            await pool.close()

    return summarize(
        latencies, rate=rate, total=total, failures=failures, elapsed=elapsed, cpu=server_cpu
    )


LOADGEN = Path(__file__).resolve().with_name("loadgen")
BASELINE = "baseline"
"""The full server of another checkout (``--baseline DIR``), measured beside this one."""
GO_MODES = {"go": "conn", "go-nethttp": "nethttp"}
"""``--client`` values run by bench/loadgen, and its ``-mode`` for each."""


def build_loadgen() -> Path:
    """The Go client, built on first use into the omed cache (keyed by its source)."""
    from omed_devcluster.binaries import cache_root

    sources = sorted(path for path in LOADGEN.iterdir() if path.suffix in {".go", ".mod"})
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in sources)).hexdigest()[:12]
    target = cache_root() / "bench" / f"loadgen-{digest}"
    if target.exists():
        return target
    if shutil.which("go") is None:
        raise SystemExit(
            "bench/webhook.py: --client go needs the Go toolchain on PATH "
            "(or measure with --client raw)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    subprocess.run(["go", "build", "-trimpath", "-o", str(partial), "."], cwd=LOADGEN, check=True)
    partial.rename(target)
    return target


def summarize(
    latencies: list[float], *, rate: float, total: int, failures: int, elapsed: float, cpu: float
) -> dict[str, Any]:
    """The figures of one measured rate (latencies in seconds, sorted here)."""
    latencies.sort()
    return {
        "rate": rate,
        "sent": total,
        "failed": failures,
        "achieved_rps": round(total / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p90_ms": round(percentile(latencies, 0.90) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "max_ms": round(latencies[-1] * 1000, 3),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 3),
        "server_cpu_us_per_request": round(cpu / total * 1e6, 1),
    }


def load_go(
    *,
    loadgen: Path,
    mode: str,
    port: int,
    pid: int,
    ca_file: Path,
    bodies_file: Path,
    rate: float,
    duration: float,
    connections: int,
) -> dict[str, Any]:
    """One rate measured by the Go client (it reads the server's CPU time itself, around the
    measured requests only)."""
    completed = subprocess.run(
        [
            str(loadgen),
            f"-url=https://127.0.0.1:{port}{ISVC_PATH}",
            f"-ca={ca_file}",
            f"-bodies={bodies_file}",
            f"-rate={rate}",
            f"-duration={duration}",
            f"-connections={connections}",
            f"-pid={pid}",
            f"-mode={mode}",
        ],
        check=True,
        capture_output=True,
    )
    report = orjson.loads(completed.stdout)
    if report.get("first_error"):
        print(f"bench/webhook.py: a request failed: {report['first_error']}", file=sys.stderr)
    figures = summarize(
        [us / 1e6 for us in report["latency_us"]],
        rate=rate,
        total=report["sent"],
        failures=report["failed"],
        elapsed=report["elapsed_s"],
        cpu=report["server_cpu_ticks"] / os.sysconf("SC_CLK_TCK"),
    )
    # How late the client itself began each request (part of the latency above): what this
    # machine's timers and scheduler add whatever the server.
    lateness = sorted(report["lateness_us"])
    figures["client_lateness_p50_ms"] = round(percentile(lateness, 0.50) / 1000, 3)
    figures["client_lateness_p99_ms"] = round(percentile(lateness, 0.99) / 1000, 3)
    # The same requests timed from the moment the client began each send (not from its due
    # time): the client's own pacing delays left out; queueing for a connection and at the
    # server still counted (the client doesn't wait for answers before sending).
    pairs = zip(report["latency_us"], report["lateness_us"], strict=True)
    sent = sorted(total - late for total, late in pairs)
    figures["from_send_p50_ms"] = round(percentile(sent, 0.50) / 1000, 3)
    figures["from_send_p99_ms"] = round(percentile(sent, 0.99) / 1000, 3)
    return figures


def make_certs(directory: Path) -> bytes:
    from omed_devcluster.certs import CertificateAuthority

    authority = CertificateAuthority.create("omed-bench-ca")
    pair = authority.issue(common_name="bench", ip_addresses=["127.0.0.1"], server=True)
    (directory / "tls.crt").write_bytes(pair.cert_pem)
    (directory / "tls.key").write_bytes(pair.key_pem)
    return authority.cert_pem


@contextlib.contextmanager
def server_process(kind: str, cert_dir: Path, *, baseline: Path | None = None) -> Any:
    """A server in a process of its own; ``baseline`` is the checkout that the
    ``baseline`` server (the full server of another commit) runs from."""
    script, env = Path(__file__), None
    if kind == BASELINE:
        assert baseline is not None
        script = baseline / "bench" / "webhook.py"
        env = {**os.environ, "PYTHONPATH": str(baseline)}
        kind = "full"
    process = subprocess.Popen(
        [sys.executable, str(script), "--serve", kind, "--cert-dir", str(cert_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield port, process.pid
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure_round(
    *, args: argparse.Namespace, rates: list[float], cert_dir: Path, ca_pem: bytes, order: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Both servers at every rate, one after the other in ``order``."""
    results: dict[str, list[dict[str, Any]]] = {}
    loadgen = build_loadgen() if args.client in GO_MODES else None
    bodies_file = cert_dir / "bodies.jsonl"
    bodies_file.write_bytes(b"\n".join(review_body(f"uid-{i}") for i in range(256)) + b"\n")
    for kind in order:
        with server_process(kind, cert_dir, baseline=args.baseline) as (port, pid):
            if loadgen is not None:
                results[kind] = [
                    load_go(
                        loadgen=loadgen,
                        mode=GO_MODES[args.client],
                        port=port,
                        pid=pid,
                        ca_file=cert_dir / "ca.crt",
                        bodies_file=bodies_file,
                        rate=rate,
                        duration=args.duration,
                        connections=args.connections,
                    )
                    for rate in rates
                ]
                continue
            results[kind] = [
                asyncio.run(
                    load(
                        port=port,
                        pid=pid,
                        ca_pem=ca_pem,
                        rate=rate,
                        duration=args.duration,
                        connections=args.connections,
                        client=args.client,
                    )
                )
                for rate in rates
            ]
    return results


def medians(runs: list[dict[str, list[dict[str, Any]]]], kind: str) -> list[dict[str, Any]]:
    """Per rate, the median over the runs of each figure."""
    out = []
    for position, first in enumerate(runs[0][kind]):
        figures = [run[kind][position] for run in runs]
        merged: dict[str, Any] = {"rate": first["rate"], "runs": len(figures)}
        for key, value in first.items():
            if key != "rate" and isinstance(value, int | float):
                merged[key] = round(statistics.median(f[key] for f in figures), 3)
        out.append(merged)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", default="500,1000")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument(
        "--client", choices=[*GO_MODES, "raw", "aiohttp"], default="go", help="the load generator"
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--serve", choices=["bare", "full"])
    parser.add_argument("--cert-dir", type=Path)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of another commit (git worktree add DIR REF): its full server is "
        "measured too, in the same alternating rounds, to compare a change",
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.cert_dir)
        return
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.baseline and not (args.baseline / "bench" / "webhook.py").is_file():
        parser.error(f"--baseline {args.baseline}: no bench/webhook.py there (a checkout?)")

    loop_name = install_uvloop()
    load_before = round(os.getloadavg()[0], 2)
    rates = [float(r) for r in args.rates.split(",")]
    runs: list[dict[str, list[dict[str, Any]]]] = []
    with tempfile.TemporaryDirectory(prefix="omed-bench-webhook-") as tmp:
        cert_dir = Path(tmp)
        ca_pem = make_certs(cert_dir)
        (cert_dir / "ca.crt").write_bytes(ca_pem)
        for run in range(args.repeat):
            # Alternate which server goes first, so neither always meets the same minute.
            order = ["bare", "full", *([BASELINE] if args.baseline else [])]
            if run % 2:
                order.reverse()
            runs.append(
                measure_round(args=args, rates=rates, cert_dir=cert_dir, ca_pem=ca_pem, order=order)
            )
    kinds = ("bare", "full", *((BASELINE,) if args.baseline else ()))
    results = runs[0] if args.repeat == 1 else {kind: medians(runs, kind) for kind in kinds}
    ratios = {
        str(int(full["rate"])): round(full["p99_ms"] / bare["p99_ms"], 2)
        for bare, full in zip(results["bare"], results["full"], strict=True)
    }
    at_1000 = next((r for r in results["full"] if r["rate"] == 1000), None)
    report: dict[str, Any] = {
        "benchmark": "webhook",
        "command": " ".join([".venv/bin/python", "bench/webhook.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "loop": loop_name,
        "cpus": os.cpu_count(),
        "connections": args.connections,
        "client": args.client,
        "load_average_1m_before": load_before,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
        "duration_s": args.duration,
        "request_bytes": len(review_body("uid-0")),
        "repeat": args.repeat,
        "bare": results["bare"],
        "full": results["full"],
        "p99_full_over_bare": ratios,
        "goals": {
            "p99_within_2x_of_bare": all(v <= 2.0 for v in ratios.values()),
            "p99_under_3ms_at_1000rps": (at_1000["p99_ms"] < 3.0 if at_1000 is not None else None),
        },
    }
    if args.baseline:
        report[BASELINE] = results[BASELINE]
        report["baseline_tree"] = str(args.baseline)
    if args.repeat > 1:
        report["each_run"] = [
            {
                kind: [
                    {
                        k: r[k]
                        for k in (
                            "rate",
                            "p50_ms",
                            "p99_ms",
                            "max_ms",
                            "server_cpu_us_per_request",
                            "client_lateness_p99_ms",
                            "from_send_p99_ms",
                        )
                        if k in r
                    }
                    for r in run[kind]
                ]
                for kind in kinds
            }
            for run in runs
        ]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
