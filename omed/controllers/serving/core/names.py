"""Every name the serving controller writes: object names, labels, log lines.

Why one module: the Service names are an interface (clients and the component's own peers
resolve them; the EndpointSlices that routing reads are found by them), and the log lines
are what an operator greps for. Each is spelled once, here.

Invariant: every name is a pure function of the component's identity (the
``ome.io/inferenceservice`` label value and the component) and, for the per-revision pair,
the revision hash, and is at most 63 characters, a DNS label as a Service name must be. When
a name would be longer, the identity prefix is cut, never the suffix that tells the objects
apart (``-headless``, ``-rev-<hash>``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

CONTROLLER_NAME: Final = "serving"
"""The workqueue and metrics name."""

MAX_SERVICE_NAME_LENGTH: Final = 63
"""Service names are DNS labels (RFC 1035)."""

HEADLESS_SUFFIX: Final = "-headless"
REVISION_INFIX: Final = "-rev-"


def base_name(*, isvc: str, component: str) -> str:
    """``{isvc}-{component}``: the traffic Service's and the PodDisruptionBudget's name, and the
    prefix of the others'. ``isvc`` is the pods' ``ome.io/inferenceservice`` label value: the
    parent InferenceService, or a standalone InferenceReplica's own name."""
    return _fit(f"{isvc}-{component}", "")


def _fit(prefix: str, suffix: str) -> str:
    room = MAX_SERVICE_NAME_LENGTH - len(suffix)
    if len(prefix) <= room:
        return prefix + suffix
    return prefix[:room].rstrip("-.") + suffix


def traffic_service(base: str) -> str:
    return base


def headless_service(base: str) -> str:
    """``{isvc}-{comp}-headless``; also the ``subdomain`` of the component's pods."""
    return _fit(base, HEADLESS_SUFFIX)


def revision_service(base: str, revision_hash: str) -> str:
    return _fit(base, f"{REVISION_INFIX}{revision_hash}")


def revision_headless_service(base: str, revision_hash: str) -> str:
    return _fit(base, f"{REVISION_INFIX}{revision_hash}{HEADLESS_SUFFIX}")


def disruption_budget(base: str) -> str:
    return base


# -- Log lines ------------------------------------------------------------------------------


class LogLine(StrEnum):
    """The messages of the controller's log lines (their key-values are separate)."""

    CREATED = "Created component object"
    UPDATED = "Updated component object"
    ADOPTED = "Adopted component object"
    DELETED = "Deleted component object"
    NAME_TAKEN = "Component object name taken by an object omed does not control"
    PDB_ENTRY_INVALID = (
        "Invalid podDisruptionBudget entry; keeping each component's PodDisruptionBudget as it is"
    )
