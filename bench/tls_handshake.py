"""Server CPU per TLS handshake, RSA-2048 against ECDSA P-256 certificates; print JSON.

    .venv/bin/python bench/tls_handshake.py [--handshakes 300]

Why: the API server opens a new connection to the webhook server whenever its idle ones are
busy (client-go keeps up to 25 idle per host and caps none), and each new connection costs
the manager a handshake on its one event loop. The charts' certificates were RSA-2048
(helm's ``genCA``, cert-manager's default) and are ECDSA P-256 now; this measures what that
saves. Both ends run in this process over memory BIOs (Python's ``ssl``, the OpenSSL the
manager uses, TLS 1.3 as the API server negotiates it); only the server side's
``do_handshake`` calls are timed (process CPU time), so the figure is the manager's cost.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import ssl
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

HOST = "ome-webhook-server-service.ome.svc"


def _write_pair(key: Any, directory: Path) -> None:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _server_cpu_per_handshake(directory: Path, handshakes: int) -> list[float]:
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.minimum_version = ssl.TLSVersion.TLSv1_2
    server_context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    client_context = ssl.create_default_context(cafile=str(directory / "tls.crt"))
    samples = []
    for _ in range(handshakes):
        c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
        client = client_context.wrap_bio(c_in, c_out, server_hostname=HOST)
        server = server_context.wrap_bio(s_in, s_out, server_side=True)
        client_done = server_done = False
        spent = 0.0
        while not (client_done and server_done):
            if not client_done:
                try:
                    client.do_handshake()
                    client_done = True
                except ssl.SSLWantReadError:
                    pass
            s_in.write(c_out.read())
            if not server_done:
                started = time.process_time()
                try:
                    server.do_handshake()
                    server_done = True
                except ssl.SSLWantReadError:
                    pass
                spent += time.process_time() - started
            c_in.write(s_out.read())
        samples.append(spent)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--handshakes", type=int, default=300)
    args = parser.parse_args()
    keys = {
        "rsa2048": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ecdsa_p256": ec.generate_private_key(ec.SECP256R1()),
    }
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="omed-bench-tls-") as tmp:
        for label, key in keys.items():
            directory = Path(tmp) / label
            directory.mkdir()
            _write_pair(key, directory)
            samples = _server_cpu_per_handshake(directory, args.handshakes)
            results[label] = {
                "server_cpu_us_per_handshake_mean": round(statistics.fmean(samples) * 1e6),
                "server_cpu_us_per_handshake_median": round(statistics.median(samples) * 1e6),
            }
    print(
        json.dumps(
            {
                "benchmark": "tls_handshake",
                "command": "bench/tls_handshake.py",
                "python": platform.python_version(),
                "openssl": ssl.OPENSSL_VERSION,
                "handshakes": args.handshakes,
                "load_average_1m": round(os.getloadavg()[0], 2),
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
