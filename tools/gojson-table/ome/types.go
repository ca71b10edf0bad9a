// Package ome declares the JSON shape of upstream OME's ServingRuntimeSpec (ome.io/v1beta1) and
// of every OME type it reaches, for gojson-table to walk. OME's Go module is not in the module
// cache, so these declarations stand in for it: each struct lists its fields in upstream's
// declaration order, with upstream's Go types and json tags, and nothing else (no behaviour,
// no defaults, no validation). Kubernetes types are the real ones from k8s.io/api.
//
// Read from upstream's sources (pkg/apis/ome/v1beta1): servingruntime_types.go (the spec, its
// pod fields and SupportedModelFormat), model.go (ModelFormat, ModelFrameworkSpec with operator
// and weight), inference_service.go (EngineSpec, DecoderSpec, RouterSpec, LeaderSpec,
// WorkerSpec, RunnerSpec, AcceleratorSelector), the ComponentExtensionSpec without the Knative
// fields, kedaconfig.go and podspec.go. The top-level "workers" field is left out: v1.3 dropped
// it ("use engineConfig.worker.size instead").
package ome

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type ServingRuntimeSpec struct {
	SupportedModelFormats []SupportedModelFormat `json:"supportedModelFormats,omitempty"`
	ModelSizeRange        *ModelSizeRangeSpec    `json:"modelSizeRange,omitempty"`
	Disabled              *bool                  `json:"disabled,omitempty"`
	RouterConfig          *RouterSpec            `json:"routerConfig,omitempty"`
	EngineConfig          *EngineSpec            `json:"engineConfig,omitempty"`
	DecoderConfig         *DecoderSpec           `json:"decoderConfig,omitempty"`
	ProtocolVersions      []string               `json:"protocolVersions,omitempty"`
	ServingRuntimePodSpec `json:",inline"`
}

type SupportedModelFormat struct {
	Name              string              `json:"name"`
	ModelFormat       *ModelFormat        `json:"modelFormat"`
	ModelType         *string             `json:"modelType,omitempty"`
	Version           *string             `json:"version,omitempty"`
	ModelFramework    *ModelFrameworkSpec `json:"modelFramework,omitempty"`
	ModelArchitecture *string             `json:"modelArchitecture,omitempty"`
	Quantization      *string             `json:"quantization,omitempty"`
	AutoSelect        *bool               `json:"autoSelect,omitempty"`
	Priority          *int32              `json:"priority,omitempty"`
	Operator          *string             `json:"operator,omitempty"`
}

type ModelFormat struct {
	Name     string  `json:"name"`
	Version  *string `json:"version,omitempty"`
	Operator *string `json:"operator,omitempty"`
	Weight   int64   `json:"weight,omitempty"`
}

type ModelFrameworkSpec struct {
	Name     string  `json:"name"`
	Version  *string `json:"version,omitempty"`
	Operator *string `json:"operator,omitempty"`
	Weight   int64   `json:"weight,omitempty"`
}

type ModelSizeRangeSpec struct {
	Min *string `json:"min,omitempty"`
	Max *string `json:"max,omitempty"`
}

type ServingRuntimePodSpec struct {
	Containers       []corev1.Container            `json:"containers"`
	Volumes          []corev1.Volume               `json:"volumes,omitempty"`
	NodeSelector     map[string]string             `json:"nodeSelector,omitempty"`
	Affinity         *corev1.Affinity              `json:"affinity,omitempty"`
	Tolerations      []corev1.Toleration           `json:"tolerations,omitempty"`
	Labels           map[string]string             `json:"labels,omitempty"`
	Annotations      map[string]string             `json:"annotations,omitempty"`
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	SchedulerName    string                        `json:"schedulerName,omitempty"`
	HostIPC          bool                          `json:"hostIPC,omitempty"`
	DNSPolicy        corev1.DNSPolicy              `json:"dnsPolicy,omitempty"`
	HostNetwork      bool                          `json:"hostNetwork,omitempty"`
}

type EngineSpec struct {
	PodSpec                `json:",inline"`
	ComponentExtensionSpec `json:",inline"`
	Runner                 *RunnerSpec          `json:"runner,omitempty"`
	Leader                 *LeaderSpec          `json:"leader,omitempty"`
	Worker                 *WorkerSpec          `json:"worker,omitempty"`
	AcceleratorOverride    *AcceleratorSelector `json:"acceleratorOverride,omitempty"`
	TopologyKey            *string              `json:"topologyKey,omitempty"`
}

type DecoderSpec struct {
	PodSpec                `json:",inline"`
	ComponentExtensionSpec `json:",inline"`
	Runner                 *RunnerSpec          `json:"runner,omitempty"`
	Leader                 *LeaderSpec          `json:"leader,omitempty"`
	Worker                 *WorkerSpec          `json:"worker,omitempty"`
	AcceleratorOverride    *AcceleratorSelector `json:"acceleratorOverride,omitempty"`
	TopologyKey            *string              `json:"topologyKey,omitempty"`
}

type LeaderSpec struct {
	PodSpec `json:",inline"`
	Runner  *RunnerSpec `json:"runner,omitempty"`
}

type WorkerSpec struct {
	PodSpec `json:",inline"`
	Size    *int        `json:"size,omitempty"`
	Runner  *RunnerSpec `json:"runner,omitempty"`
}

type RouterSpec struct {
	PodSpec                `json:",inline"`
	ComponentExtensionSpec `json:",inline"`
	Runner                 *RunnerSpec       `json:"runner,omitempty"`
	Config                 map[string]string `json:"config,omitempty"`
}

type RunnerSpec struct {
	corev1.Container `json:",inline"`
}

type AcceleratorSelector struct {
	AcceleratorClass *string                 `json:"acceleratorClass,omitempty"`
	Constraints      *AcceleratorConstraints `json:"constraints,omitempty"`
	Policy           string                  `json:"policy,omitempty"`
}

type AcceleratorConstraints struct {
	MinMemory                   *int64   `json:"minMemory,omitempty"`
	MaxMemory                   *int64   `json:"maxMemory,omitempty"`
	MinComputePerformanceTFLOPS *int64   `json:"minComputePerformanceTFLOPS,omitempty"`
	MinArchitectureVersion      *string  `json:"minArchitectureVersion,omitempty"`
	RequiredFeatures            []string `json:"requiredFeatures,omitempty"`
	ExcludedClasses             []string `json:"excludedClasses,omitempty"`
	ArchitectureFamilies        []string `json:"architectureFamilies,omitempty"`
	PreferredPrecisions         []string `json:"preferredPrecisions,omitempty"`
}

type ComponentExtensionSpec struct {
	MinReplicas        *int                       `json:"minReplicas,omitempty"`
	MaxReplicas        int                        `json:"maxReplicas,omitempty"`
	ScaleTarget        *int                       `json:"scaleTarget,omitempty"`
	ScaleMetric        *string                    `json:"scaleMetric,omitempty"`
	TimeoutSeconds     *int64                     `json:"timeoutSeconds,omitempty"`
	Labels             map[string]string          `json:"labels,omitempty"`
	Annotations        map[string]string          `json:"annotations,omitempty"`
	MinAvailable       *intstr.IntOrString        `json:"minAvailable,omitempty"`
	MaxUnavailable     *intstr.IntOrString        `json:"maxUnavailable,omitempty"`
	DeploymentStrategy *appsv1.DeploymentStrategy `json:"deploymentStrategy,omitempty"`
	KedaConfig         *KedaConfig                `json:"kedaConfig,omitempty"`
}

type KedaConfig struct {
	EnableKeda        bool   `json:"enableKeda,omitempty"`
	PromServerAddress string `json:"promServerAddress,omitempty"`
	CustomPromQuery   string `json:"customPromQuery,omitempty"`
	ScalingThreshold  string `json:"scalingThreshold,omitempty"`
	ScalingOperator   string `json:"scalingOperator,omitempty"`
}

// PodSpec is OME's copy of corev1.PodSpec in which containers may be left out: every field
// omitempty, in corev1's order as of the copy.
type PodSpec struct {
	Volumes                       []corev1.Volume                   `json:"volumes,omitempty"`
	InitContainers                []corev1.Container                `json:"initContainers,omitempty"`
	Containers                    []corev1.Container                `json:"containers,omitempty"`
	EphemeralContainers           []corev1.EphemeralContainer       `json:"ephemeralContainers,omitempty"`
	RestartPolicy                 corev1.RestartPolicy              `json:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64                            `json:"terminationGracePeriodSeconds,omitempty"`
	ActiveDeadlineSeconds         *int64                            `json:"activeDeadlineSeconds,omitempty"`
	DNSPolicy                     corev1.DNSPolicy                  `json:"dnsPolicy,omitempty"`
	NodeSelector                  map[string]string                 `json:"nodeSelector,omitempty"`
	ServiceAccountName            string                            `json:"serviceAccountName,omitempty"`
	DeprecatedServiceAccount      string                            `json:"serviceAccount,omitempty"`
	AutomountServiceAccountToken  *bool                             `json:"automountServiceAccountToken,omitempty"`
	NodeName                      string                            `json:"nodeName,omitempty"`
	HostNetwork                   bool                              `json:"hostNetwork,omitempty"`
	HostPID                       bool                              `json:"hostPID,omitempty"`
	HostIPC                       bool                              `json:"hostIPC,omitempty"`
	ShareProcessNamespace         *bool                             `json:"shareProcessNamespace,omitempty"`
	SecurityContext               *corev1.PodSecurityContext        `json:"securityContext,omitempty"`
	ImagePullSecrets              []corev1.LocalObjectReference     `json:"imagePullSecrets,omitempty"`
	Hostname                      string                            `json:"hostname,omitempty"`
	Subdomain                     string                            `json:"subdomain,omitempty"`
	Affinity                      *corev1.Affinity                  `json:"affinity,omitempty"`
	SchedulerName                 string                            `json:"schedulerName,omitempty"`
	Tolerations                   []corev1.Toleration               `json:"tolerations,omitempty"`
	HostAliases                   []corev1.HostAlias                `json:"hostAliases,omitempty"`
	PriorityClassName             string                            `json:"priorityClassName,omitempty"`
	Priority                      *int32                            `json:"priority,omitempty"`
	DNSConfig                     *corev1.PodDNSConfig              `json:"dnsConfig,omitempty"`
	ReadinessGates                []corev1.PodReadinessGate         `json:"readinessGates,omitempty"`
	RuntimeClassName              *string                           `json:"runtimeClassName,omitempty"`
	EnableServiceLinks            *bool                             `json:"enableServiceLinks,omitempty"`
	PreemptionPolicy              *corev1.PreemptionPolicy          `json:"preemptionPolicy,omitempty"`
	Overhead                      corev1.ResourceList               `json:"overhead,omitempty"`
	TopologySpreadConstraints     []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	SetHostnameAsFQDN             *bool                             `json:"setHostnameAsFQDN,omitempty"`
	OS                            *corev1.PodOS                     `json:"os,omitempty"`
	HostUsers                     *bool                             `json:"hostUsers,omitempty"`
	SchedulingGates               []corev1.PodSchedulingGate        `json:"schedulingGates,omitempty"`
	ResourceClaims                []corev1.PodResourceClaim         `json:"resourceClaims,omitempty"`
}
