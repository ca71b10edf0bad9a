"""The webhook server's metrics, under controller-runtime's names, on :data:`omed.metrics.REGISTRY`.

Why these names: OME's dashboards and the chart's "admission webhook fails" alert read
controller-runtime's webhook metrics; omed keeps the names, labels and buckets so they keep
working. ``webhook`` is the path (``/validate-ome-io-v1beta1-inferenceservice``); ``code``
the HTTP status code the server answered.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from omed.metrics import REGISTRY

LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus' default buckets, as controller-runtime uses."""

REQUESTS: Final = Counter(
    "controller_runtime_webhook_requests_total",
    "Total number of admission requests by HTTP status code.",
    ["webhook", "code"],
    registry=REGISTRY,
)
LATENCY: Final = Histogram(
    "controller_runtime_webhook_latency_seconds",
    "Histogram of the latency of processing admission requests",
    ["webhook"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
IN_FLIGHT: Final = Gauge(
    "controller_runtime_webhook_requests_in_flight",
    "Current number of admission requests being served.",
    ["webhook"],
    registry=REGISTRY,
)
