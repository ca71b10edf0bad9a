"""API client: config loading, the QPS/burst limiter, request metrics, typed errors.

:func:`defer_client_imports` is for short-lived clients (``kubectl ome``): called before any
of this package's modules is imported, it

* defers the CA loading of aiohttp's default TLS contexts to their first use
  (:mod:`omed.kube.aiohttp_tls`);
* registers prometheus_client as a deferred package (:func:`omed.lazy.defer_package`): the
  metric classes, the registry and the collectors come from their own modules, and its
  ``__init__``, which imports its HTTP exposition (``http.server``, ``wsgiref``, the push
  gateway's client), runs only when another name is read from it. ``kubectl ome`` counts its
  requests in the process registry but serves no ``/metrics``, so it never runs it;
* registers dateutil's ``tz`` package as deferred: kubernetes-asyncio's ``ApiClient``, which
  its kubeconfig loader imports by name, imports dateutil's parser, whose modules bind the
  ``tz`` package (``from .. import tz``) and read its time zones only when they parse a
  date; ``kubectl ome`` sends its requests itself and never has the ``ApiClient`` parse one,
  so ``dateutil.tz``'s ``__init__`` (its modules, ``zoneinfo``'s tarball reader) never runs.

The manager does not call it: a long-running process gains nothing from a faster start and
keeps the ordinary imports (no import hook around aiohttp, prometheus_client's ``__init__``
run when first imported).
"""


def defer_client_imports() -> None:
    """Defer what a short-lived client never uses (module docstring); idempotent, and a no-op
    for a library imported already."""
    from omed.kube.aiohttp_tls import install
    from omed.lazy import defer_package

    install()
    defer_package(
        "prometheus_client",
        {
            "Counter": "metrics",
            "Gauge": "metrics",
            "Histogram": "metrics",
            "disable_created_metrics": "metrics",
            "values": "values",  # metrics.py: from . import values
            "CollectorRegistry": "registry",
            "GCCollector": "gc_collector",
            "PlatformCollector": "platform_collector",
            "ProcessCollector": "process_collector",
        },
    )
    defer_package("dateutil")  # the parent, so that its tz package can be deferred
    defer_package("dateutil.tz")
