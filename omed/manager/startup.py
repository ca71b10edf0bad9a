"""The manager's start-up checks and the exact lines they log.

Why this module exists: a manager that starts with a configuration it can't honour does
damage later, far from the cause (a status block it can't write, a CRD that drops the
columns it stores). So every replica checks its inputs before it serves anything, and
stops with one fixed line that an operator's grep finds:

1. the flags (:mod:`omed.config.flags`, exit 2), then the leader election timing
   (``Invalid leader election timing``, exit 1);
2. the kubeconfig (``unable to get kubeconfig``, exit 1);
3. the startup entries of the ``inferenceservice-config`` ConfigMap in the manager's
   namespace (``Failed to initialize <name> configuration``, exit 1), then the line
   ``Configured InferenceReplica status representation``;
4. the status schema preflight: the cluster's ``inferencereplicas.ome.io`` CRD must serve
   v1beta1 with a status subresource and declare ``status.instanceStatusEncoding`` and
   ``status.instanceStatusColumns`` (``status schema preflight failed``, exit 1).

Invariant: each check either returns what the next step needs or raises
:class:`StartupFailure` carrying the exact message and error to log; nothing here logs,
exits or keeps state, so the order and the messages are tested without a cluster. Beside
them, :func:`run_loop`: the event loop both the manager and its webhook child run on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol

from omed.api.constants import GROUP, PLURAL_INFERENCE_REPLICAS, POD_GROUP_CRD, VERSION
from omed.config import (
    INVALID_LEADER_ELECTION_TIMING,
    StartupConfig,
    StartupConfigError,
    load_startup_config,
)
from omed.config.entries import CONFIGMAP_NAME, STARTUP_ENTRY_NAMES
from omed.config.flag_values import ZapLevel
from omed.kube.client import Resource
from omed.kube.errors import NotFound
from omed.kube.resources import CONFIGMAPS, CRDS

__all__ = [
    "DEFAULT_MANAGER_NAMESPACE",
    "INFERENCE_REPLICA_CRD",
    "MSG_CONFIGMAP_UNREADABLE",
    "MSG_FAILED_TO_START",
    "MSG_INVALID_TIMING",
    "MSG_KUBECONFIG",
    "MSG_POD_GROUPS",
    "MSG_SCHEMA_PREFLIGHT_FAILED",
    "MSG_STATUS_REPRESENTATION",
    "POLICY_CRDS",
    "ClusterReader",
    "StartupFailure",
    "check_status_schema",
    "detect_pod_group_crd",
    "detect_policy_crds",
    "load_configmap_startup",
    "log_level",
    "manager_namespace",
    "split_bind_address",
    "status_preflight",
    "status_representation",
]

MSG_INVALID_TIMING: Final = INVALID_LEADER_ELECTION_TIMING
MSG_KUBECONFIG: Final = "unable to get kubeconfig"
"""controller-runtime's ``GetConfigOrDie`` line."""
MSG_CONFIGMAP_UNREADABLE: Final = "Failed to read the inferenceservice-config ConfigMap"
MSG_STATUS_REPRESENTATION: Final = "Configured InferenceReplica status representation"
MSG_SCHEMA_PREFLIGHT_FAILED: Final = "status schema preflight failed"
MSG_FAILED_TO_START: Final = "Failed to start manager"
"""Logged with the error of anything that stops a started manager, ``leader election lost``
included, before it exits 1."""

DEFAULT_MANAGER_NAMESPACE: Final = "ome"
INFERENCE_REPLICA_CRD: Final = f"{PLURAL_INFERENCE_REPLICAS}.{GROUP}"
STATUS_FIELDS: Final = ("instanceStatusEncoding", "instanceStatusColumns")
POLICY_CRDS: Final = {
    "rollout_policy": f"rolloutpolicies.{GROUP}",
    "autoscaler_policy": f"autoscalerpolicies.{GROUP}",
}
"""FeatureGates field -> the CRD whose presence at start turns it on."""


class ClusterReader(Protocol):
    """The part of :class:`omed.kube.client.KubeClient` the checks read through."""

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any: ...


@dataclass(frozen=True)
class StartupFailure(Exception):
    """A check that stops the manager: log ``message`` with ``error``, exit ``exit_code``."""

    message: str
    error: str
    exit_code: int = 1

    def __str__(self) -> str:
        return f"{self.message}: {self.error}"


# --- pure helpers ------------------------------------------------------------------------------


def manager_namespace(env: Mapping[str, str]) -> str:
    """The namespace of the manager's ConfigMap: ``$POD_NAMESPACE``, else ``ome``.

    The Lease has its own flag (``--leader-election-namespace``, same default).
    """
    return env.get("POD_NAMESPACE") or DEFAULT_MANAGER_NAMESPACE


def run_loop(coroutine: Coroutine[Any, Any, int]) -> int:
    """Run ``coroutine`` to its exit code on uvloop when it is installed, else on asyncio's
    default loop: the one loop the manager and its webhook child both run on."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def log_level(level: ZapLevel) -> int:
    """The :mod:`logging` threshold of a ``--zap-log-level``.

    A zap integer level ``n`` enables debug verbosity 1..n (``logr``'s ``V(n)``); ``V(1)``
    is :data:`logging.DEBUG`, and each further level one below it.
    """
    if isinstance(level, int):
        return max(1, logging.DEBUG - (level - 1))
    return {
        "debug": logging.DEBUG,
        "info": logging.INFO,
        "error": logging.ERROR,
        "panic": logging.CRITICAL,
    }[level]


def split_bind_address(address: str) -> tuple[str | None, int] | None:
    """``host:port`` -> (host or None for every interface, port); None when "0" or empty
    turns the server off, as controller-runtime's ``--metrics-bind-address`` does.

    The flag parser has validated the form; ``[::1]:8080`` gives ``("::1", 8080)``.
    """
    if address in ("", "0"):
        return None
    host, _, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    return (host or None, int(port, 10))


def status_representation(config: StartupConfig) -> dict[str, object]:
    """The key-values of ``Configured InferenceReplica status representation``."""
    status = config.omenative_status
    return {
        "instanceStatusEncoding": status.instance_status_encoding,
        "maxDecodedInstances": status.decode_bound,
    }


def check_status_schema(crd: Mapping[str, Any]) -> None:
    """Raise :class:`StartupFailure` unless ``crd`` can store both status encodings.

    It must serve ``v1beta1``, with the status subresource, and its schema must declare
    ``status.instanceStatusEncoding`` and ``status.instanceStatusColumns``: a CRD from
    before v1.3 prunes the columns, and every ColumnarV2 write would lose the rows.
    """
    versions = (crd.get("spec") or {}).get("versions") or []
    version = next((v for v in versions if v.get("name") == VERSION), None)
    if version is None or not version.get("served", False):
        _schema_failure(f"it doesn't serve {VERSION}")
    if not ((version.get("subresources") or {}).get("status") is not None):
        _schema_failure(f"{VERSION} has no status subresource")
    schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
    status = (schema.get("properties") or {}).get("status") or {}
    declared = status.get("properties") or {}
    missing = [f"status.{name}" for name in STATUS_FIELDS if name not in declared]
    if missing:
        _schema_failure(f"its {VERSION} schema has no {' or '.join(missing)}")


def _schema_failure(why: str) -> NoReturn:
    raise StartupFailure(
        MSG_SCHEMA_PREFLIGHT_FAILED,
        f"CustomResourceDefinition {INFERENCE_REPLICA_CRD} is too old: {why}; "
        "upgrade the ome-crd chart before ome-resources",
    )


# --- checks that read the cluster -------------------------------------------------------------


async def load_configmap_startup(client: ClusterReader, *, namespace: str) -> StartupConfig:
    """Read ``inferenceservice-config`` in ``namespace`` and validate its startup entries.

    A missing ConfigMap has no omenativeStatus block, the one required entry, so it fails
    as ``Failed to initialize OMENative status configuration``; any other read error is
    :data:`MSG_CONFIGMAP_UNREADABLE`.
    """
    try:
        configmap = await client.get(CONFIGMAPS, CONFIGMAP_NAME, namespace)
    except NotFound:
        missing = StartupConfigError(
            STARTUP_ENTRY_NAMES["omenativeStatus"],
            f"ConfigMap {namespace}/{CONFIGMAP_NAME} not found",
        )
        raise StartupFailure(missing.message, missing.error) from None
    except Exception as err:  # an API or connection error: say what we tried to read
        raise StartupFailure(
            MSG_CONFIGMAP_UNREADABLE,
            f"get ConfigMap {namespace}/{CONFIGMAP_NAME}: {_describe(err)}",
        ) from err
    data = (configmap or {}).get("data") or {}
    try:
        return load_startup_config(data)
    except StartupConfigError as err:
        raise StartupFailure(err.message, err.error) from err


async def status_preflight(client: ClusterReader) -> None:
    """Read the InferenceReplica CRD and :func:`check_status_schema` it."""
    try:
        crd = await client.get(CRDS, INFERENCE_REPLICA_CRD)
    except NotFound:
        raise StartupFailure(
            MSG_SCHEMA_PREFLIGHT_FAILED,
            f"CustomResourceDefinition {INFERENCE_REPLICA_CRD} not found; "
            "install the ome-crd chart before ome-resources",
        ) from None
    except Exception as err:
        raise StartupFailure(
            MSG_SCHEMA_PREFLIGHT_FAILED,
            f"get CustomResourceDefinition {INFERENCE_REPLICA_CRD}: {_describe(err)}",
        ) from err
    check_status_schema(crd or {})


async def detect_policy_crds(client: ClusterReader) -> tuple[dict[str, bool], list[str]]:
    """Which optional policy CRDs the cluster has, read once at start (FeatureGates fields),
    and the errors of the reads that failed.

    The manager looks for the CRDs only when it starts. A CRD that
    can't be read counts as absent: the feature stays off, which refuses references to it
    with a message that says so, rather than stopping the manager.
    """
    found: dict[str, bool] = {}
    errors: list[str] = []
    for gate, name in POLICY_CRDS.items():
        try:
            await client.get(CRDS, name)
        except NotFound:
            found[gate] = False
        except Exception as err:
            found[gate] = False
            errors.append(f"get CustomResourceDefinition {name}: {_describe(err)}")
        else:
            found[gate] = True
    return found, errors


POD_GROUP_VERSION: Final = "v1alpha1"
"""The PodGroup version omed writes (scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1``)."""
MSG_POD_GROUPS: Final = "Gang scheduling"
"""Logged once at start: whether multi-pod Instances get PodGroups, and why not."""


async def detect_pod_group_crd(client: ClusterReader) -> tuple[bool, str]:
    """Whether multi-pod Instances get PodGroups: the CRD ``podgroups.scheduling.x-k8s.io``
    exists and serves ``v1alpha1``, read once at start; and why, for the start-up log line.

    A CRD that can't be read counts as absent, as the policy CRDs do: pods are created
    without PodGroups, and the InferenceReplicas with multi-pod Instances say so in their
    GangSchedulingUnavailable condition, rather than the manager stopping. A CRD installed
    later is seen at the next start.
    """
    try:
        crd = await client.get(CRDS, POD_GROUP_CRD)
    except NotFound:
        return False, f"CustomResourceDefinition {POD_GROUP_CRD} not found"
    except Exception as err:
        return False, f"get CustomResourceDefinition {POD_GROUP_CRD}: {_describe(err)}"
    versions = ((crd or {}).get("spec") or {}).get("versions") or []
    if not any(v.get("name") == POD_GROUP_VERSION and v.get("served") for v in versions):
        return False, f"CustomResourceDefinition {POD_GROUP_CRD} serves no {POD_GROUP_VERSION}"
    return True, f"CustomResourceDefinition {POD_GROUP_CRD} found"


def _describe(err: BaseException) -> str:
    return str(err) or type(err).__name__
