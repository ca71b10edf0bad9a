"""The manager's configuration: command-line flags and the inferenceservice-config ConfigMap.

Why one package: both are inputs that a user writes for OME's Go manager and that omed must
read the same way, with the same errors. Everything here is parsing and validation, with no
API calls of its own: the manager hands in ``argv``, the environment, and a ``fetch``
coroutine for the ConfigMap. So this package sits below the controllers and imports nothing
from kube, informers or controllers.

* :mod:`omed.config.flags`: ``parse_flags`` -> :class:`Options`; leader election timing.
* :mod:`omed.config.duration`: Go duration syntax.
* :mod:`omed.config.entries`: startup and reconcile-time ConfigMap entries
  (:mod:`omed.config.lifecycle`: the reconcile-time ``lifecycle`` settings, key by key).
* :mod:`omed.config.cache`: the TTL cache that reconciles read the ConfigMap through.
"""

from typing import TYPE_CHECKING

from omed.lazy import exports

if TYPE_CHECKING:
    from omed.config.cache import ConfigCache
    from omed.config.duration import DurationError, format_duration, parse_duration
    from omed.config.entries import (
        BatchSize,
        DeployConfig,
        EventRecorderConfig,
        IngressConfig,
        LifecycleConfig,
        LifecycleScaleConfig,
        MigrationAuditConfig,
        OMENativeStatusConfig,
        Percent,
        ReconcileConfig,
        ReconcileConfigError,
        StartupConfig,
        StartupConfigError,
        deploy_entry,
        lifecycle_entry,
        load_startup_config,
        reconcile_entries,
        resolve_budget,
    )
    from omed.config.flags import (
        INVALID_LEADER_ELECTION_TIMING,
        FlagError,
        HelpRequested,
        LeaderElectionTimingError,
        Options,
        check_leader_election_timing,
        parse_flags,
        parse_flags_or_exit,
        usage,
    )

_WHERE: dict[str, str] = {
    "ConfigCache": "omed.config.cache",
    "DurationError": "omed.config.duration",
    "format_duration": "omed.config.duration",
    "parse_duration": "omed.config.duration",
    "BatchSize": "omed.config.entries",
    "DeployConfig": "omed.config.entries",
    "EventRecorderConfig": "omed.config.entries",
    "IngressConfig": "omed.config.entries",
    "LifecycleConfig": "omed.config.entries",
    "LifecycleScaleConfig": "omed.config.entries",
    "MigrationAuditConfig": "omed.config.entries",
    "OMENativeStatusConfig": "omed.config.entries",
    "Percent": "omed.config.entries",
    "ReconcileConfig": "omed.config.entries",
    "ReconcileConfigError": "omed.config.entries",
    "StartupConfig": "omed.config.entries",
    "StartupConfigError": "omed.config.entries",
    "deploy_entry": "omed.config.entries",
    "lifecycle_entry": "omed.config.entries",
    "load_startup_config": "omed.config.entries",
    "reconcile_entries": "omed.config.entries",
    "resolve_budget": "omed.config.entries",
    "INVALID_LEADER_ELECTION_TIMING": "omed.config.flags",
    "FlagError": "omed.config.flags",
    "HelpRequested": "omed.config.flags",
    "LeaderElectionTimingError": "omed.config.flags",
    "Options": "omed.config.flags",
    "check_leader_election_timing": "omed.config.flags",
    "parse_flags": "omed.config.flags",
    "parse_flags_or_exit": "omed.config.flags",
    "usage": "omed.config.flags",
}
"""Each name of ``__all__`` and the module it comes from. They are imported on first use,
so that importing :mod:`omed.config.duration` (which ``kubectl ome`` reads) doesn't
import the ConfigMap's models."""


__all__ = [
    "INVALID_LEADER_ELECTION_TIMING",
    "BatchSize",
    "ConfigCache",
    "DeployConfig",
    "DurationError",
    "EventRecorderConfig",
    "FlagError",
    "HelpRequested",
    "IngressConfig",
    "LeaderElectionTimingError",
    "LifecycleConfig",
    "LifecycleScaleConfig",
    "MigrationAuditConfig",
    "OMENativeStatusConfig",
    "Options",
    "Percent",
    "ReconcileConfig",
    "ReconcileConfigError",
    "StartupConfig",
    "StartupConfigError",
    "check_leader_election_timing",
    "deploy_entry",
    "format_duration",
    "lifecycle_entry",
    "load_startup_config",
    "parse_duration",
    "parse_flags",
    "parse_flags_or_exit",
    "reconcile_entries",
    "resolve_budget",
    "usage",
]


__getattr__ = exports(__name__, _WHERE, globals())
