"""Every string a migration writes (upstream OME's): record messages, event reasons, the
capacity condition, and the surge's node affinity. The record phases, which the CLI reads
too, are :data:`omed.api.constants.MigrationPhase`'s (``MIGRATION_PHASE_*``); the audit
ledger's phases, reasons and outcomes are :mod:`omed.controllers.ledger.document`'s.

Why a module: the messages are part of the interface (the CLI, users' alerts and the
product's pages quote them), so they live in one place, tested where they are used
(:mod:`.migrate`, :mod:`.migratepods`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from omed.api.base import ConditionStatus
from omed.api.constants import (
    MIGRATION_PHASE_ACCEPTED,
    MIGRATION_PHASE_DRAINING,
    MIGRATION_PHASE_SURGE_PENDING,
    MIGRATION_PHASE_SURGE_READY,
    MigrationPhase,
)

EVENT_ACCEPTED: Final = "MigrationRequestAccepted"
EVENT_REJECTED: Final = "MigrationRequestRejected"
EVENT_UNSUPPORTED_SCHEMA: Final = "UnsupportedSchemaVersion"
EVENT_COMPLETED: Final = "MigrationCompleted"
EVENT_EXPIRED: Final = "MigrationExpired"
EVENT_WEDGED: Final = "MigrationSurgeWedged"
EVENT_RATE_LIMITED: Final = "RateLimited"
EVENT_POLICY_UNCONFIGURED: Final = "MigrationPolicyUnconfigured"
EVENT_FROM_NODE_MISMATCH: Final = "MigrationFromNodeMismatch"
EVENT_NODE_AFFINITY_CONFLICT: Final = "MigrationNodeAffinityConflict"
EVENT_DEFERRED: Final = "MigrationDeferred"
EVENT_CREATE_BLOCKED: Final = "MigrationSurgeCreateBlocked"
EVENT_PARKED: Final = "MigrationParked"

CONDITION_POLICY_UNCONFIGURED: Final = "MigrationPolicyUnconfigured"
CAPACITY_STATES: Final[Mapping[bool, tuple[ConditionStatus, str, str]]] = {
    False: (
        "True",
        "MigrationCapacityUnconfigured",
        "lifecycle.audit is not configured; migration requests wait instead of executing",
    ),
    True: ("False", "MigrationCapacityConfigured", "Migration capacity policy is configured"),
}
"""The capacity condition's status, reason and message, by whether capacity is configured."""

MSG_SURGE_ALLOCATED: Final = "surge allocated; waiting for surge pods"
MSG_SURGE_READY: Final = "surge in rotation and available"
MSG_DRAINING: Final = "source draining"
MSG_PARKED: Final = "source drain parked: Terminating past their deletion deadline: "
"""A Draining record whose source pods all outlived their deletion deadline; the pods follow."""
MSG_HELD: Final = "waiting for migration capacity policy (no lifecycle.audit configured)"
MSG_NEVER: Final = "migrations disabled by MigrationPolicy Mode=Never"
MSG_SOURCE_MISSING: Final = "source InstanceStatus missing"
MSG_SOURCE_EXPIRED: Final = "migration expired; source pods unhealthy"
"""The Ready message of a source restored unhealthy after its record expired."""
MSG_NO_LIVE_PODS: Final = "source instance has no live pods"
STEP_CREATE_SURGE: Final = "CreateSurge"
GATE_MIGRATING: Final = "Migrating"
"""The gate reason of a source drained by its migration."""

BLOCKERS: Final[Mapping[MigrationPhase, str]] = {
    MIGRATION_PHASE_ACCEPTED: "surge never allocated",
    MIGRATION_PHASE_SURGE_PENDING: "surge pods never became ready",
    MIGRATION_PHASE_SURGE_READY: "source drain never started",
    MIGRATION_PHASE_DRAINING: "source drain incomplete",
}

HINT_WEIGHT: Final = 50
"""Weight of the hint nodes' preferred affinity: one term, so all hints weigh the same."""

HELD_REQUEUE: Final = 60.0
"""Seconds before a held or deferred request is looked at again when ``requeue.operation``
is unset (a watch event usually comes first)."""


def migrated_message(surge: int) -> str:
    return f"migrated to instance={surge}"


def migration_event(uuid: str, what: str) -> str:
    """An event message about one migration: ``OMENative migration uuid=<uuid> <what>``,
    the prefix every migration Warning and the completion event share."""
    return f"OMENative migration uuid={uuid} {what}"


def instance_event(component: str, index: int, what: str) -> str:
    """An event message about one Instance's move: ``OMENative component=<c> instance=<n>
    <what>``, the prefix of a migration's acceptance and of every relocation event."""
    return f"OMENative component={component} instance={index} {what}"


def rejected_event(uuid: str, reason: str) -> str:
    return migration_event(uuid, f"rejected: {reason}")


def go_duration(seconds: float) -> str:
    """A duration as Go's ``time.Duration.String`` writes whole seconds: ``1h0m0s``."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
