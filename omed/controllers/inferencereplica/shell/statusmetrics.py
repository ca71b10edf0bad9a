"""The InferenceReplica controller's status-encoding metrics, on :data:`omed.metrics.REGISTRY`.

Why: during a switch of ``omenativeStatus`` an operator watches the fleet convert and wants
to see decode failures and rejected writes without reading events. Only the leader runs the
controller, so only the leader records these series: a standby exports none of them (their
``HELP`` and ``TYPE`` lines only, never a sample at 0 that a ``sum`` across replicas would
mix in). The leader's controller calls :func:`leading` when its workers start, so the leader
exports the encoding gauge for both encodings from then on, at 0 until it has seen one. A
leader that loses its Lease exits, so no former leader keeps stale series. Encoding labels
are the codec's ``dense_v1`` / ``columnar_v2`` (:data:`omed.statuscodec.METRIC_LABELS`).

Invariant: ``omed_inferencereplica_status_encoding{encoding}`` counts each InferenceReplica
the controller has looked at once, by the encoding its status is stored in as last seen or
written; an InferenceReplica that is gone is forgotten.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge

from omed.metrics import REGISTRY
from omed.statuscodec import METRIC_LABELS, Encoding

ENCODING_GAUGE: Final = "omed_inferencereplica_status_encoding"
CONVERSIONS: Final = "omed_inferencereplica_status_conversions_total"
DECODE_FAILURES: Final = "omed_inferencereplica_status_decode_failures_total"
BYTES_WRITTEN: Final = "omed_inferencereplica_status_bytes_written_total"
SIZE_EXCEEDED: Final = "omed_inferencereplica_status_size_exceeded_total"

_by_encoding = Gauge(
    ENCODING_GAUGE,
    "InferenceReplicas by the encoding their per-Instance status is stored in.",
    ["encoding"],
    registry=REGISTRY,
)


def _counter(name: str, documentation: str, label: str) -> Counter:
    return Counter(name.removesuffix("_total"), documentation, [label], registry=REGISTRY)


_conversions = Counter(
    CONVERSIONS.removesuffix("_total"),
    "Status writes that converted per-Instance status from one encoding to the other.",
    ["from", "to"],
    registry=REGISTRY,
)
_decode_failures = _counter(
    DECODE_FAILURES,
    "Stored per-Instance statuses that could not be decoded, once per resourceVersion.",
    "reason",
)
_bytes_written = _counter(
    BYTES_WRITTEN,
    "Bytes of InferenceReplica status writes the API server accepted (compact JSON).",
    "encoding",
)
_size_exceeded = _counter(
    SIZE_EXCEEDED,
    "InferenceReplica status writes the API server rejected as too large.",
    "encoding",
)
_stored: dict[str, Encoding] = {}
"""``namespace/name`` -> stored encoding, for the gauge (one controller per process)."""


def leading() -> None:
    """The controller's workers start (on the leader): export the gauge for both encodings.

    Nothing at import: a standby imports this module too, and must export no series."""
    for label in METRIC_LABELS.values():
        _by_encoding.labels(encoding=label)


def stored(key: str, encoding: Encoding | None) -> None:
    """Record the encoding ``key`` is stored in now (``None``: not known, or gone)."""
    before = _stored.get(key)
    if before == encoding:
        return
    if before is not None:
        _by_encoding.labels(encoding=METRIC_LABELS[before]).dec()
    if encoding is None:
        _stored.pop(key, None)
        return
    _stored[key] = encoding
    _by_encoding.labels(encoding=METRIC_LABELS[encoding]).inc()


def converted(old: Encoding, new: Encoding) -> None:
    _conversions.labels(METRIC_LABELS[old], METRIC_LABELS[new]).inc()


def decode_failed(reason: str) -> None:
    _decode_failures.labels(reason=reason).inc()


def written(encoding: Encoding, size: int) -> None:
    _bytes_written.labels(encoding=METRIC_LABELS[encoding]).inc(size)


def size_exceeded(encoding: Encoding) -> None:
    _size_exceeded.labels(encoding=METRIC_LABELS[encoding]).inc()
