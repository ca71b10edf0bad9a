"""The process-wide Prometheus registry.

Every metric omed exports is registered here, under controller-runtime's and client-go's
names, so that existing OME dashboards and alerts keep working. Modules define their own
metric objects against :data:`REGISTRY`; the manager serves it on ``/metrics``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

REGISTRY = CollectorRegistry(auto_describe=True)
