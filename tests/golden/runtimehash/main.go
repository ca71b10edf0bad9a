// Command runtimehash computes upstream OME's runtime revision name for the runtime specs in
// cases.json, with Go's encoding/json, independently of omed's Python and of the field table.
//
// It follows upstream's runtimerevision package: the spec is decoded into the typed
// ServingRuntimeSpec, json.Marshal writes it, the hash is the first 8 hex digits of the bytes'
// SHA-256, and the name is cr-<runtime>-<hash> for a ClusterServingRuntime and
// r-<namespace>-<runtime>-<hash> for a ServingRuntime. The OME types below are a separate
// transcription of upstream's (pkg/apis/ome/v1beta1) from the one tools/gojson-table walks, so a
// slip in either shows as a failing golden test; the Kubernetes types are k8s.io/api's.
//
// Regenerate expected.json (offline, from the module cache), from this directory:
//
//	GOFLAGS=-mod=mod GOPROXY=off go run . < cases.json > expected.json
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type servingRuntimeSpec struct {
	SupportedModelFormats []supportedModelFormat `json:"supportedModelFormats,omitempty"`
	ModelSizeRange        *sizeRange             `json:"modelSizeRange,omitempty"`
	Disabled              *bool                  `json:"disabled,omitempty"`
	RouterConfig          *router                `json:"routerConfig,omitempty"`
	EngineConfig          *component             `json:"engineConfig,omitempty"`
	DecoderConfig         *component             `json:"decoderConfig,omitempty"`
	ProtocolVersions      []string               `json:"protocolVersions,omitempty"`
	runtimePod            `json:",inline"`
}

type supportedModelFormat struct {
	Name              string      `json:"name"`
	ModelFormat       *formatOrFw `json:"modelFormat"`
	ModelType         *string     `json:"modelType,omitempty"`
	Version           *string     `json:"version,omitempty"`
	ModelFramework    *formatOrFw `json:"modelFramework,omitempty"`
	ModelArchitecture *string     `json:"modelArchitecture,omitempty"`
	Quantization      *string     `json:"quantization,omitempty"`
	AutoSelect        *bool       `json:"autoSelect,omitempty"`
	Priority          *int32      `json:"priority,omitempty"`
	Operator          *string     `json:"operator,omitempty"`
}

// ModelFormat and ModelFrameworkSpec have the same fields.
type formatOrFw struct {
	Name     string  `json:"name"`
	Version  *string `json:"version,omitempty"`
	Operator *string `json:"operator,omitempty"`
	Weight   int64   `json:"weight,omitempty"`
}

type sizeRange struct {
	Min *string `json:"min,omitempty"`
	Max *string `json:"max,omitempty"`
}

type runtimePod struct {
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

// EngineSpec and DecoderSpec have the same fields.
type component struct {
	omePod              `json:",inline"`
	extension           `json:",inline"`
	Runner              *runner      `json:"runner,omitempty"`
	Leader              *leader      `json:"leader,omitempty"`
	Worker              *worker      `json:"worker,omitempty"`
	AcceleratorOverride *accelerator `json:"acceleratorOverride,omitempty"`
	TopologyKey         *string      `json:"topologyKey,omitempty"`
}

type router struct {
	omePod    `json:",inline"`
	extension `json:",inline"`
	Runner    *runner           `json:"runner,omitempty"`
	Config    map[string]string `json:"config,omitempty"`
}

type leader struct {
	omePod `json:",inline"`
	Runner *runner `json:"runner,omitempty"`
}

type worker struct {
	omePod `json:",inline"`
	Size   *int    `json:"size,omitempty"`
	Runner *runner `json:"runner,omitempty"`
}

type runner struct {
	corev1.Container `json:",inline"`
}

type accelerator struct {
	AcceleratorClass *string      `json:"acceleratorClass,omitempty"`
	Constraints      *constraints `json:"constraints,omitempty"`
	Policy           string       `json:"policy,omitempty"`
}

type constraints struct {
	MinMemory                   *int64   `json:"minMemory,omitempty"`
	MaxMemory                   *int64   `json:"maxMemory,omitempty"`
	MinComputePerformanceTFLOPS *int64   `json:"minComputePerformanceTFLOPS,omitempty"`
	MinArchitectureVersion      *string  `json:"minArchitectureVersion,omitempty"`
	RequiredFeatures            []string `json:"requiredFeatures,omitempty"`
	ExcludedClasses             []string `json:"excludedClasses,omitempty"`
	ArchitectureFamilies        []string `json:"architectureFamilies,omitempty"`
	PreferredPrecisions         []string `json:"preferredPrecisions,omitempty"`
}

// ComponentExtensionSpec.
type extension struct {
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
	KedaConfig         *keda                      `json:"kedaConfig,omitempty"`
}

type keda struct {
	EnableKeda        bool   `json:"enableKeda,omitempty"`
	PromServerAddress string `json:"promServerAddress,omitempty"`
	CustomPromQuery   string `json:"customPromQuery,omitempty"`
	ScalingThreshold  string `json:"scalingThreshold,omitempty"`
	ScalingOperator   string `json:"scalingOperator,omitempty"`
}

// OME's PodSpec: corev1.PodSpec's fields, each omitempty.
type omePod struct {
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

type testCase struct {
	Name      string          `json:"name"`
	Kind      string          `json:"kind"`
	Namespace string          `json:"namespace"`
	Runtime   string          `json:"runtime"`
	Spec      json.RawMessage `json:"spec"`
}

type result struct {
	Name     string `json:"name"`
	Bytes    string `json:"bytes"`
	Hash     string `json:"hash"`
	Revision string `json:"revision"`
}

func revisionName(kind, namespace, runtime, hash string) string {
	if kind == "ClusterServingRuntime" {
		return fmt.Sprintf("cr-%s-%s", runtime, hash)
	}
	return fmt.Sprintf("r-%s-%s-%s", namespace, runtime, hash)
}

func main() {
	var in struct {
		Cases []testCase `json:"cases"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		panic(err)
	}
	out := struct {
		Cases []result `json:"cases"`
	}{Cases: []result{}}
	for _, c := range in.Cases {
		var spec servingRuntimeSpec
		if err := json.Unmarshal(c.Spec, &spec); err != nil {
			panic(c.Name + ": " + err.Error())
		}
		raw, err := json.Marshal(&spec)
		if err != nil {
			panic(c.Name + ": " + err.Error())
		}
		sum := sha256.Sum256(raw)
		short := hex.EncodeToString(sum[:])[:8]
		out.Cases = append(out.Cases, result{
			Name:     c.Name,
			Bytes:    string(raw),
			Hash:     short,
			Revision: revisionName(c.Kind, c.Namespace, c.Runtime, short),
		})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
