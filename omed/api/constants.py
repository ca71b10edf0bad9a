"""Names that omed shares with upstream OME, its users and their tools.

Labels, annotations, condition types, finalizers and component names are an interface: a
user's selectors, dashboards and scripts match them byte for byte, and the pods, CLI and
controllers of one cluster must agree on them. So every such string lives here, once, and
the rest of omed imports it; nothing else spells an ``ome.io/`` key by hand.

Where upstream fixes a name we use it as is. Pods made by omed before it used upstream's pod
labels carry ``ome.io/incarnation`` and ``ome.io/revision`` (the full revision name) instead of
``ome.io/instance-incarnation`` and ``ome.io/revision-hash``; omed still reads them
(:data:`LEGACY_LABEL_INCARNATION`, :data:`LABEL_REVISION`) and writes them no more.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

# -- API group -------------------------------------------------------------------------------

GROUP: Final = "ome.io"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

KIND_INFERENCE_SERVICE: Final = "InferenceService"
KIND_INFERENCE_REPLICA: Final = "InferenceReplica"
KIND_SERVING_RUNTIME: Final = "ServingRuntime"
KIND_CLUSTER_SERVING_RUNTIME: Final = "ClusterServingRuntime"
KIND_CLUSTER_BASE_MODEL: Final = "ClusterBaseModel"
KIND_BASE_MODEL: Final = "BaseModel"

PLURAL_INFERENCE_SERVICES: Final = "inferenceservices"
PLURAL_INFERENCE_REPLICAS: Final = "inferencereplicas"
PLURAL_SERVING_RUNTIMES: Final = "servingruntimes"
PLURAL_CLUSTER_SERVING_RUNTIMES: Final = "clusterservingruntimes"

# -- Components ------------------------------------------------------------------------------

ComponentName = Literal["engine", "decoder", "router"]
"""The components of an InferenceService that OMENative manages."""

COMPONENT_ENGINE: Final = "engine"
COMPONENT_DECODER: Final = "decoder"
COMPONENT_ROUTER: Final = "router"
COMPONENTS: Final[tuple[ComponentName, ...]] = get_args(ComponentName)
"""Components in reporting order: engine first, then decoder and router."""

# -- Migration record phases ----------------------------------------------------------------

MigrationPhase = Literal[
    "Accepted",
    "SurgePending",
    "SurgeReady",
    "Draining",
    "Completed",
    "Failed",
    "Relocated",
    "Pending",
    "InProgress",
]
"""A record's phase in ``status.migrations``: what the controller writes, the CLI reads and
users' scripts wait on."""
MIGRATION_PHASES: Final[tuple[MigrationPhase, ...]] = get_args(MigrationPhase)
MIGRATION_PHASE_ACCEPTED: Final[MigrationPhase] = "Accepted"
MIGRATION_PHASE_SURGE_PENDING: Final[MigrationPhase] = "SurgePending"
MIGRATION_PHASE_SURGE_READY: Final[MigrationPhase] = "SurgeReady"
MIGRATION_PHASE_DRAINING: Final[MigrationPhase] = "Draining"
MIGRATION_PHASE_COMPLETED: Final[MigrationPhase] = "Completed"
MIGRATION_PHASE_FAILED: Final[MigrationPhase] = "Failed"
MIGRATION_PHASE_RELOCATED: Final[MigrationPhase] = "Relocated"
"""An automatic relocation's record: born terminal, confirmed once the Instance is Ready."""
TERMINAL_MIGRATION_PHASES: Final[frozenset[MigrationPhase]] = frozenset(
    {MIGRATION_PHASE_COMPLETED, MIGRATION_PHASE_FAILED, MIGRATION_PHASE_RELOCATED}
)
"""The phases after which a record changes no more."""

# -- Deployment modes ------------------------------------------------------------------------

DEPLOYMENT_MODE_OME_NATIVE: Final = "OMENative"
DEPLOYMENT_MODE_RAW: Final = "RawDeployment"
KNOWN_DEPLOYMENT_MODES: Final = (
    "RawDeployment",
    "Serverless",
    "MultiNode",
    "PDDisaggregated",
    "OMENative",
)
"""Upstream's modes. ``spec.deploymentMode`` stays an open string: omed acts on OMENative only
and must not reject a manifest that names a mode a newer upstream added."""

# -- Labels ----------------------------------------------------------------------------------

LABEL_INFERENCE_SERVICE: Final = "ome.io/inferenceservice"
"""On InferenceReplicas and pods: the owning InferenceService's name. Upstream caches only
pods that carry it."""
LABEL_COMPONENT: Final = "component"
"""On pods: engine, decoder or router (unprefixed, as upstream writes it)."""
LABEL_INSTANCE_INDEX: Final = "ome.io/instance-index"
"""On pods: the decimal index of the Instance the pod belongs to."""
LABEL_INCARNATION: Final = "ome.io/instance-incarnation"
"""On pods: the decimal incarnation of the Instance that created the pod."""
LABEL_REVISION: Final = "ome.io/revision"
"""On pods made by omed before upstream's labels: the full revision name
(``<isvc>-<component>-<hash>``). Read, never written any more: ``ome.io/revision-hash`` wins."""
LABEL_MANAGED_BY: Final = "ome.io/managed-by"
"""On pods and InferenceReplica ControllerRevisions: ``OMENative``."""
MANAGED_BY_OME_NATIVE: Final = "OMENative"
LABEL_RUNNER: Final = "ome.io/runner"
"""On pods (upstream's label): the runner the pod plays in its Instance: default, leader or
worker."""
LABEL_POD_ORDINAL: Final = "ome.io/pod-ordinal"
"""On pods: the decimal ordinal of the pod among its runner's pods."""
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
"""On the pods of a multi-pod Instance: ``<isvc>-<component>-<index>``, the gang's name."""
POD_GROUP_API_GROUP: Final = "scheduling.x-k8s.io"
"""The scheduler-plugins API group of PodGroups (version ``v1alpha1``)."""
POD_GROUP_CRD: Final = f"podgroups.{POD_GROUP_API_GROUP}"
"""The PodGroup CustomResourceDefinition: present at start, multi-pod Instances get PodGroups."""
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
"""On nodes (Kubernetes' well-known label): the node's hostname. A migration's surge is kept
off the node it leaves, and drawn to the hint nodes, by node affinity on it."""
LEGACY_LABEL_INCARNATION: Final = "ome.io/incarnation"
"""On pods made by omed before upstream's labels: the Instance's incarnation (read only)."""
LEGACY_LABEL_REVISION: Final = LABEL_REVISION
LABEL_RUNTIME_OF: Final = "ome.io/runtime-of"
"""On runtime ControllerRevisions: the name of the runtime whose spec the revision stores.
Garbage collection groups revisions by it: one runtime name, across namespaces and kinds."""
LABEL_RUNTIME_OF_KIND: Final = "ome.io/runtime-of-kind"
"""On runtime ControllerRevisions: ServingRuntime or ClusterServingRuntime."""
LABEL_RUNTIME_OF_NAMESPACE: Final = "ome.io/runtime-of-namespace"
"""On runtime ControllerRevisions: a ServingRuntime's namespace; empty for a
ClusterServingRuntime."""
LABEL_REVISION_HASH: Final = "ome.io/revision-hash"
"""On runtime ControllerRevisions: the 8-hex content hash that ends the revision's name. On
pods (upstream's label): the 8-hex hash of the pod's revision, without the name prefix; on
omed's per-revision Services too, so their EndpointSlices carry it."""

# -- Annotations -----------------------------------------------------------------------------

ANNOTATION_DEPLOYMENT_MODE: Final = "ome.io/deploymentMode"
"""On an InferenceService, wins over ``spec.deploymentMode`` when set."""
ANNOTATION_CONTROLLER_WRITE: Final = "ome.io/controller-write"
"""``"true"`` on every InferenceReplica that the InferenceService controller writes."""
CONTROLLER_WRITE_TRUE: Final = "true"
ANNOTATION_RELEASE_HELD_REVISION: Final = "ome.io/release-held-revision"
"""On an InferenceReplica: the full revision name whose Held retry block should be released."""
ANNOTATION_MIGRATION_REQUEST_PREFIX: Final = "ome.io/migration-request-v1-"
"""On an InferenceService: prefix of a manual migration request; the key ends in the request
UUID and the value is the request as JSON."""
ANNOTATION_ROLLOUT_PAUSED: Final = "ome.io/rollout-paused"
"""On an InferenceService: its rollout is paused; a migration start refuses to move it."""
ANNOTATION_ROLLOUT_PROMOTE: Final = "ome.io/rollout-promote"
ANNOTATION_ROLLOUT_ROLLBACK: Final = "ome.io/rollout-rollback"
ANNOTATION_RUNTIME_SYNC: Final = "ome.io/runtime-sync"
"""On an InferenceService pinned to a runtime revision (``autoSync: false``): a new value moves
the pin to the revision of the runtime's current spec, once (the value is stored as
``status.lastRuntimeSyncToken``)."""
ANNOTATION_GC_ELIGIBLE_SINCE: Final = "ome.io/gc-eligible-since"
"""On runtime ControllerRevisions: when garbage collection marked the revision (RFC 3339,
UTC). The grace period counts from it, so it survives a manager restart."""
ANNOTATION_TOPOLOGY_KEY: Final = "ome.io/topology-key"
"""On PodGroups (upstream's annotation): the component's topology key. omed's API carries no
topology key, so omed never writes it (and its patches leave one that is there alone)."""
ANNOTATION_CREATED_BY: Final = "ome.io/created-by"
"""On runtime ControllerRevisions: ``ome-controller``, the writer (upstream's value)."""
CREATED_BY_OME: Final = "ome-controller"

# -- Pod readiness ---------------------------------------------------------------------------

READINESS_GATE_SERVING: Final = "ome.io/serving"
"""Pod readiness-gate condition type that the InferenceReplica controller sets."""

# -- Finalizers ------------------------------------------------------------------------------

FINALIZER_INFERENCE_REPLICA: Final = "ome.io/inferencereplica-cleanup"
"""Held on an InferenceReplica while its Instances' pods and PodGroups are torn down."""

# -- Condition types -------------------------------------------------------------------------

CONDITION_READY: Final = "Ready"
CONDITION_ENGINE_READY: Final = "EngineReady"
CONDITION_DECODER_READY: Final = "DecoderReady"
CONDITION_ROUTER_READY: Final = "RouterReady"
COMPONENT_READY_CONDITIONS: Final[dict[ComponentName, str]] = {
    "engine": CONDITION_ENGINE_READY,
    "decoder": CONDITION_DECODER_READY,
    "router": CONDITION_ROUTER_READY,
}
