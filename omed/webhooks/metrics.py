"""The webhook server's metrics, under controller-runtime's names, on :data:`omed.metrics.REGISTRY`.

Two sets: the requests (``controller_runtime_webhook_*``, per path and code, and
``controller_runtime_webhook_panics_total``, the requests a handler raised on, answered with
a refusal of code 500 instead of a crash) and the certificate poller's reads
(``certwatcher_read_certificate_total`` and ``certwatcher_read_certificate_errors_total``,
controller-runtime's certwatcher counters: an alert on the errors' rate catches a rotation
that keeps failing long before the old certificate expires).

Why these names: OME's dashboards and the chart's "admission webhook fails" alert read
controller-runtime's webhook metrics; omed keeps the names, labels and buckets so they keep
working. ``webhook`` is the path (``/validate-ome-io-v1beta1-inferenceservice``); ``code``
the HTTP status code the server answered.

Why not ``prometheus_client``'s metric objects: every admission request would update four of
them (in flight up and down, the latency histogram, the request counter), each behind a lock,
about 3.5 us hot and several times that at 1,000 requests a second, when each request finds
them out of the CPU's caches. As the work queues do (:mod:`omed.workqueue.metrics`), the
server writes plain numbers on a :class:`WebhookSeries` bound once per path, and
:class:`WebhookCollector` makes the families when ``/metrics`` is scraped.

Invariants: a path's series lives as long as the process (a server rebuilt on the same path
keeps counting, so a counter never goes backwards); updates happen on the event loop's
thread, and a scrape from another thread reads values at worst one update stale.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from omed.metrics import REGISTRY, FastHistogram, add_histogram

LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus' default buckets, as controller-runtime uses."""

READ_CERTIFICATE_NAME: Final = "certwatcher_read_certificate"
READ_CERTIFICATE_ERRORS_NAME: Final = "certwatcher_read_certificate_errors"
REQUESTS_NAME: Final = "controller_runtime_webhook_requests"
LATENCY_NAME: Final = "controller_runtime_webhook_latency_seconds"
IN_FLIGHT_NAME: Final = "controller_runtime_webhook_requests_in_flight"
PANICS_NAME: Final = "controller_runtime_webhook_panics"


class WebhookSeries:
    """The numbers of one webhook path. The server writes the attributes directly."""

    __slots__ = ("in_flight", "latency", "path", "requests")

    def __init__(self, path: str) -> None:
        self.path = path
        self.in_flight = 0
        self.latency = FastHistogram(LATENCY_BUCKETS)
        self.requests: dict[int, int] = {}
        """Answers by HTTP status code."""

    def answered(self, status: int, seconds: float) -> None:
        """One request answered with ``status`` after ``seconds``."""
        self.latency.observe(seconds)
        self.requests[status] = self.requests.get(status, 0) + 1


class WebhookCollector(Collector):
    """Every webhook path's series, as controller-runtime's three metric families."""

    def __init__(self) -> None:
        self._series: dict[str, WebhookSeries] = {}
        self.panics = 0
        """Requests whose handler raised, every path together (controller-runtime's counter
        has no labels)."""

    def series(self, path: str) -> WebhookSeries:
        """The series of ``path``, made on first use."""
        found = self._series.get(path)
        if found is None:
            found = self._series[path] = WebhookSeries(path)
        return found

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            REQUESTS_NAME,
            "Total number of admission requests by HTTP status code.",
            labels=["webhook", "code"],
        )
        latency = HistogramMetricFamily(
            LATENCY_NAME,
            "Histogram of the latency of processing admission requests",
            labels=["webhook"],
        )
        in_flight = GaugeMetricFamily(
            IN_FLIGHT_NAME,
            "Current number of admission requests being served.",
            labels=["webhook"],
        )
        for path, series in sorted(self._series.items()):
            for status, count in sorted(dict(series.requests).items()):
                requests.add_metric([path, str(status)], count)
            add_histogram(latency, [path], series.latency)
            in_flight.add_metric([path], series.in_flight)
        yield from (requests, latency, in_flight)
        yield CounterMetricFamily(PANICS_NAME, "Total number of webhook panics", value=self.panics)


class CertWatcherCounts:
    """The certificate poller's counts, process-wide as controller-runtime's are: every check
    of the files is a read; every check that finds them unusable is also an error."""

    __slots__ = ("errors", "reads")

    def __init__(self) -> None:
        self.reads = 0
        self.errors = 0


class CertWatcherCollector(Collector):
    def __init__(self, counts: CertWatcherCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            READ_CERTIFICATE_NAME, "Total number of certificate reads", value=self._counts.reads
        )
        yield CounterMetricFamily(
            READ_CERTIFICATE_ERRORS_NAME,
            "Total number of certificate read errors",
            value=self._counts.errors,
        )


COLLECTOR: Final = WebhookCollector()
REGISTRY.register(COLLECTOR)
CERTWATCHER: Final = CertWatcherCounts()
REGISTRY.register(CertWatcherCollector(CERTWATCHER))
