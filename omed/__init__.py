"""omed.

Importing any omed module registers prometheus_client as a deferred package
(:func:`omed.lazy.defer_package`): its metric classes, registry and collectors come from
their own modules, and its ``__init__``, which imports its HTTP exposition (``http.server``,
``wsgiref``, the push gateway's client), runs only when another name is read from it, such
as the manager's ``generate_latest``. ``kubectl ome``, which counts the client's requests in
the process registry but serves no ``/metrics``, never runs it.
"""

from omed.lazy import defer_package

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
