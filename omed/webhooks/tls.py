"""The webhook server's TLS certificate, reloaded when its files rotate.

Why: the serving certificate comes from a Secret mounted as ``tls.crt`` and ``tls.key``
(cert-manager, or the chart's own job, renews it). The kubelet swaps both files in place;
a server that kept the certificate it started with would fail every admission once it
expired, and with ``failurePolicy: Fail`` that stops every InferenceService write. So the
server polls the files' identity (device, inode, size, mtime) every few seconds, and loads
a changed pair into a fresh :class:`ssl.SSLContext` that holds that pair only. The server
listens with one fixed context whose SNI callback, which OpenSSL calls for every handshake
(with or without SNI), moves the connection to the current pair's context: new handshakes
get the new certificate, connections already open keep theirs.

Why a fresh context per pair: OpenSSL keeps one certificate per key type in a context, so
loading an ECDSA pair into the context that served an RSA one would keep serving the old RSA
certificate to every client that negotiates RSA. The key type is whatever the Secret holds
(the chart makes ECDSA P-256); nothing here assumes one.

Why the poller never stops: when it stopped at the first error it didn't expect (a private
copy it couldn't write), rotation ended there, silently, and admissions failed weeks later
when the old certificate expired.
A check that goes wrong (files missing, unreadable or garbage, a temporary directory it
can't stage the copy in, anything else) keeps the pair loaded before, is logged once per
distinct error, is counted (``certwatcher_read_certificate_errors_total``), and the next
poll tries again, whether or not the files changed.

Invariants:

* The current context only ever holds one certificate and its key. A pair is loaded from a
  private copy of the bytes read once, so a half-rotated pair (new certificate, old key) is
  refused and the old pair keeps serving; the next poll tries again.
* Every context, listening or current, has the same settings: TLS 1.2 is the minimum; ALPN
  offers only ``http/1.1`` (the server speaks no HTTP/2). The listening context holds no
  certificate, so a handshake that somehow skipped the callback would fail, never get an
  old certificate.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from pathlib import Path
from typing import Final

from omed.log import kv
from omed.webhooks import metrics

CERT_NAME: Final = "tls.crt"
KEY_NAME: Final = "tls.key"

log = logging.getLogger("webhooks.certwatcher")

Signature = tuple[tuple[int, int, int, int], tuple[int, int, int, int]]


class CertificateError(RuntimeError):
    """The certificate or key can't be read or don't form a pair."""


def _stat(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def new_server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


class ServingCertificate:
    """The SSLContexts of the webhook server, and the files the pair is loaded from.

    :attr:`context` is the one the server listens with (it never changes); :attr:`current`
    holds the pair loaded last, and every new connection is served from it.
    """

    def __init__(self, *, cert_dir: Path, cert_name: str = CERT_NAME, key_name: str = KEY_NAME):
        self.cert_path = cert_dir / cert_name
        self.key_path = cert_dir / key_name
        self.current: ssl.SSLContext | None = None
        """The context of the pair loaded last (None before :meth:`load`)."""
        self.context = new_server_context()
        self.context.sni_callback = self._serve_current
        self._signature: Signature | None = None
        self._failing = False
        """The last check failed: the next one loads the files whether or not they changed."""
        self._last_error: str | None = None
        self.loads = 0
        """Times a pair was loaded and made current (1 after :meth:`load`)."""

    def _serve_current(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        """OpenSSL's servername callback, called for every ClientHello, SNI or not: serve
        this handshake from the current pair's context."""
        if self.current is not None:
            connection.context = self.current

    def _signature_now(self) -> Signature:
        return (_stat(self.cert_path), _stat(self.key_path))

    def load(self) -> None:
        """Load the current pair into a fresh context and serve it from the next handshake
        on; :class:`CertificateError` when it can't be used (the pair before keeps serving).
        One certificate read, counted (and an error when it fails)."""
        metrics.CERTWATCHER.reads += 1
        try:
            self._load()
        except CertificateError:
            metrics.CERTWATCHER.errors += 1
            raise

    def _load(self) -> None:
        try:
            signature = self._signature_now()
            cert_pem = self.cert_path.read_bytes()
            key_pem = self.key_path.read_bytes()
        except OSError as exc:
            raise CertificateError(f"reading the webhook certificate: {exc}") from exc
        fresh = new_server_context()
        try:
            with tempfile.TemporaryDirectory(
                prefix="omed-webhook-cert-", ignore_cleanup_errors=True
            ) as private:
                cert_copy = Path(private, CERT_NAME)
                key_copy = Path(private, KEY_NAME)
                cert_copy.write_bytes(cert_pem)
                fd = os.open(key_copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as key_file:
                    key_file.write(key_pem)
                try:
                    fresh.load_cert_chain(cert_copy, key_copy)
                except (ssl.SSLError, OSError, ValueError) as exc:
                    raise CertificateError(
                        f"{self.cert_path} and {self.key_path} are not a usable pair: {exc}"
                    ) from exc
        except OSError as exc:  # making or writing the private copy (a full or read-only /tmp)
            # Not str(exc): it names the random directory, and the log says each error once.
            reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.strerror else repr(exc)
            raise CertificateError(
                f"copying the webhook certificate to a directory in {tempfile.gettempdir()}: "
                f"{reason}"
            ) from exc
        self.current = fresh
        self._signature = signature
        self.loads += 1

    def reload_if_changed(self) -> bool:
        """Check the files (one certificate read, counted) and load the pair when they
        changed since it was loaded, or when the check before failed; whether a new pair is
        served now. Never raises: a check that fails is counted as an error and logged (once
        per distinct error), and the pair loaded before keeps serving."""
        metrics.CERTWATCHER.reads += 1
        try:
            try:
                signature = self._signature_now()
            except OSError as exc:
                raise CertificateError(f"reading the webhook certificate: {exc}") from exc
            if signature == self._signature and not self._failing:
                return False
            self._load()
        except Exception as exc:  # CertificateError, or anything unforeseen: poll again
            metrics.CERTWATCHER.errors += 1
            self._failing = True
            self._report(str(exc) if isinstance(exc, CertificateError) else repr(exc))
            return False
        self._failing = False
        self._last_error = None
        log.info("Updated current TLS certificate", extra=kv(cert=str(self.cert_path)))
        return True

    def _report(self, error: str) -> None:
        if error != self._last_error:
            self._last_error = error
            log.error(
                "Failed to reload the webhook certificate; keeping the current one",
                extra=kv(cert=str(self.cert_path), error=error),
            )
