"""The certificate poller keeps going through every way the files can be wrong for a while.

A running server (polling every 0.05 s) sees, in turn: a rotation it can't stage (the
private copy's temporary directory is unusable, as a full or read-only /tmp makes it), the
key file gone, the key file unreadable, garbage in both files, and at last a new valid pair.
It keeps serving the last good pair throughout, picks up the pair it couldn't stage once it
can (the files didn't change), then the final one; it logs each distinct error once, not on
every poll; and it counts every read and every failed read under controller-runtime's
certwatcher counters, on the manager's /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import aiohttp
import pytest
from cryptography import x509
from webhook_world import client_context, write_pair

from omed.manager.http import MetricsServer
from omed.metrics import REGISTRY
from omed.webhooks import InferenceServiceValidator, WebhookServer
from omed_devcluster.certs import CertificateAuthority

POLL = 0.05
FOR_A_WHILE = 0.4
"""How long each fault lasts: several polls."""
FAILED = "Failed to reload the webhook certificate; keeping the current one"
READS = "certwatcher_read_certificate_total"
ERRORS = "certwatcher_read_certificate_errors_total"


def counter(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def served_serial(server: WebhookServer, authority: CertificateAuthority) -> int:
    _, writer = await asyncio.open_connection(
        "127.0.0.1", server.port, ssl=client_context(authority)
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()
        await writer.wait_closed()


def serial(cert_pem: bytes) -> int:
    return x509.load_pem_x509_certificate(cert_pem).serial_number


async def until_served(
    server: WebhookServer, authority: CertificateAuthority, cert_pem: bytes, within: float = 5
) -> None:
    deadline = time.monotonic() + within
    while await served_serial(server, authority) != serial(cert_pem):
        assert time.monotonic() < deadline, "the new pair was never picked up"
        await asyncio.sleep(POLL)


async def test_the_poller_survives_every_bad_rotation_and_counts_them(
    tmp_path: Path,
    authority: CertificateAuthority,
    rotate: Callable[..., bytes],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cert_dir = tmp_path / "certs"
    first = write_pair(authority, cert_dir)
    server = WebhookServer(
        handlers=[InferenceServiceValidator()],
        port=0,
        host="127.0.0.1",
        cert_dir=cert_dir,
        cert_poll_interval=POLL,
    )
    reads, errors = counter(READS), counter(ERRORS)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    caplog.set_level(logging.ERROR, logger="webhooks.certwatcher")
    await server.start()
    try:
        assert await served_serial(server, authority) == serial(first)

        # 1. A rotation that can't be staged: the temporary directory is a file now.
        scratch.rmdir()
        scratch.write_bytes(b"")
        second = rotate(cert_dir)
        await asyncio.sleep(FOR_A_WHILE)
        assert await served_serial(server, authority) == serial(first)
        # Staging works again: the same files, unchanged, are loaded now.
        scratch.unlink()
        scratch.mkdir()
        await until_served(server, authority, second)

        # 2. The key vanishes.
        (cert_dir / "tls.key").unlink()
        await asyncio.sleep(FOR_A_WHILE)
        # 3. The key is unreadable (a directory: unreadable for root too).
        (cert_dir / "tls.key").mkdir()
        await asyncio.sleep(FOR_A_WHILE)
        (cert_dir / "tls.key").rmdir()
        # 4. Garbage in both files.
        (cert_dir / "tls.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\ngarbage\n")
        (cert_dir / "tls.key").write_bytes(os.urandom(300))
        await asyncio.sleep(FOR_A_WHILE)
        assert await served_serial(server, authority) == serial(second)

        # 5. A new valid pair.
        third = rotate(cert_dir)
        await until_served(server, authority, third)
    finally:
        await server.stop()

    failures = [r for r in caplog.records if r.getMessage() == FAILED]
    print(
        f"\n{len(failures)} errors logged; {counter(ERRORS) - errors:.0f} failed reads"
        f" of {counter(READS) - reads:.0f}: "
        + "; ".join(str(getattr(r, "kv", {}).get("error")) for r in failures)
    )
    distinct = {getattr(r, "kv", {}).get("error") for r in failures}
    # Once per distinct error: 4 faults (garbage may show as 2 if a poll fell between the
    # two writes), not once per poll.
    assert 4 <= len(failures) <= 5, [getattr(r, "kv", {}) for r in failures]
    assert len(distinct) == len(failures)
    # Every poll reads; every poll during a fault is a failed read.
    polls_in_faults = 4 * FOR_A_WHILE / POLL
    assert counter(ERRORS) - errors >= polls_in_faults / 2
    assert counter(READS) - reads >= counter(ERRORS) - errors + 3  # start, 2nd and 3rd pair


async def test_the_counters_are_controller_runtimes_on_the_managers_metrics() -> None:
    server = MetricsServer(address="127.0.0.1:0")
    await server.start()
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/metrics") as response,
        ):
            exposition = await response.text()
    finally:
        await server.stop()
    for name, help_ in (
        (READS, "Total number of certificate reads"),
        (ERRORS, "Total number of certificate read errors"),
    ):
        assert f"# HELP {name} {help_}\n# TYPE {name} counter\n{name} " in exposition
    assert "certwatcher_read_certificate_created" not in exposition  # as Go's client


def a_bug(self: object) -> NoReturn:
    raise KeyError("a bug")


async def test_an_unforeseen_error_in_a_check_is_counted_and_the_poller_goes_on(
    tmp_path: Path,
    authority: CertificateAuthority,
    rotate: Callable[..., bytes],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cert_dir = tmp_path / "certs"
    write_pair(authority, cert_dir)
    server = WebhookServer(
        handlers=[], port=0, host="127.0.0.1", cert_dir=cert_dir, cert_poll_interval=POLL
    )
    caplog.set_level(logging.ERROR, logger="webhooks.certwatcher")
    await server.start()
    try:
        errors = counter(ERRORS)
        with monkeypatch.context() as patch:
            patch.setattr(type(server.certificate), "_signature_now", a_bug)
            await asyncio.sleep(FOR_A_WHILE)
        assert counter(ERRORS) - errors >= FOR_A_WHILE / POLL / 2
        assert [getattr(r, "kv", {}).get("error") for r in caplog.records] == ["KeyError('a bug')"]
        newer = rotate(cert_dir)
        await until_served(server, authority, newer)
    finally:
        await server.stop()
