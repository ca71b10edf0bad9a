"""The process-wide Prometheus registry, and the histogram of omed's hot paths.

Every metric omed exports is registered here, under controller-runtime's and client-go's
names, so that existing OME dashboards and alerts keep working. Modules define their own
metric objects against :data:`REGISTRY`; the manager serves it on ``/metrics``. Hot paths
(the work queues, the webhook server) don't update ``prometheus_client`` metric objects, which
take a lock per update: they write plain numbers and :class:`FastHistogram` buckets, and a
collector of their own turns those into metric families when ``/metrics`` is scraped.

What every process exports besides (docs/metrics.md lists every series):

* ``process_*`` (CPU seconds, resident and virtual memory, open and maximum file descriptors,
  start time) and ``python_info`` and ``python_gc_*``: prometheus_client's process, platform
  and garbage-collector collectors, the counterparts of controller-runtime's process and Go
  runtime collectors;
* ``omed_build_info{version, python_version} 1``: the version is :data:`omed.version.VERSION`,
  the one the CLI and the plugin print, so a dashboard shows which build each pod runs.

Invariant: no ``_created`` series, whatever the environment says. Go's client, which
controller-runtime's names come from, has none, and each one doubles the series a counter or a
histogram costs Prometheus; so importing this module turns them off for the whole process
before any metric object exists (the collectors built at scrape time never make them).
"""

from __future__ import annotations

import platform
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

disable_created_metrics()  # type: ignore[no-untyped-call]

BUILD_INFO: Final = "omed_build_info"

REGISTRY = CollectorRegistry(auto_describe=True)


class BuildInfoCollector(Collector):
    """``omed_build_info{version, python_version} 1``: which build a process runs.

    Its version is read when the metric is first collected (:data:`omed.version.VERSION`,
    by default), not when the collector is registered: a process that never serves
    ``/metrics`` (``kubectl ome``) never reads the distribution's metadata.
    """

    def __init__(self, *, version: str | None = None, python_version: str | None = None) -> None:
        self._version = version
        self._python_version = python_version or platform.python_version()

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            BUILD_INFO,
            "A metric with a constant '1' value labeled by the version of omed and of the "
            "Python that runs it.",
            labels=["version", "python_version"],
        )

    def describe(self) -> Iterator[Metric]:
        """The family without its sample: what the registry checks names with."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        if self._version is None:
            from omed.version import VERSION

            self._version = VERSION
        family = self._family()
        family.add_metric([self._version, self._python_version], 1)
        yield family


ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)
REGISTRY.register(BuildInfoCollector())


class FastHistogram:
    """A histogram whose ``observe`` is one bisect, one list increment and one addition."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds: tuple[float, ...] = tuple(bounds)
        # counts[i] holds observations in (bounds[i-1], bounds[i]]; the last slot is +Inf.
        self.counts: list[int] = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        # bisect_left finds the first bound >= value, which is Prometheus' ``le`` rule.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        """Buckets in exposition form: ``[(le, cumulative count), ..., ("+Inf", count)]``."""
        counts = list(self.counts)
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, counts, strict=False):
            running += count
            out.append((_go_float(bound), running))
        running += counts[-1]
        out.append(("+Inf", running))
        return out


def _go_float(value: float) -> str:
    """A bucket bound as Go prints it (``1e-08``, ``0.005``, ``10``; not Python's ``10.0``).

    Exact for bounds below 1e6 (where Go switches to ``1e+06``), which covers every bucket here.
    """
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def add_histogram(
    family: HistogramMetricFamily, labels: list[str], histogram: FastHistogram
) -> None:
    """One series of ``family`` from ``histogram``, at scrape time."""
    family.add_metric(labels, histogram.cumulative(), histogram.sum)
