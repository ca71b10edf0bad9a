{{/*
The shape of the values, checked before anything renders: a bad value fails `helm template`,
`install` and `upgrade` with "<path> must be <what>, got <value as JSON>", as the
ome-resources chart does. A null block or field takes the default: a policy stays off, and
the CRDs keep helm.sh/resource-policy: keep (only an explicit false drops it, so a null
can't make `helm uninstall` delete every InferenceService).
*/}}
{{- define "ome-crd.checkValues" -}}
{{- $ome := .Values.ome -}}
{{- if not (kindIs "map" $ome) -}}
{{- fail (printf "ome must be a map of the chart's values, got %s" (toJson $ome)) -}}
{{- end -}}
{{- $fields := dict "rolloutPolicy" "enabled" "autoscalerPolicy" "enabled" "crds" "keep" -}}
{{- range $key, $field := $fields -}}
{{- $block := index $ome $key -}}
{{- if not (or (kindIs "invalid" $block) (kindIs "map" $block)) -}}
{{- fail (printf "ome.%s must be a map of %s, or null, got %s" $key $field (toJson $block)) -}}
{{- end -}}
{{- $value := index ($block | default dict) $field -}}
{{- if not (or (kindIs "invalid" $value) (kindIs "bool" $value)) -}}
{{- fail (printf "ome.%s.%s must be true or false, got %s" $key $field (toJson $value)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A boolean value: "true" or empty. Arguments: dict "root" $ "key" "crds" "field" "keep"
"default" true.
*/}}
{{- define "ome-crd.flag" -}}
{{- $value := index (index .root.Values.ome .key | default dict) .field -}}
{{- if kindIs "invalid" $value -}}
{{- $value = .default -}}
{{- end -}}
{{- if $value -}}true{{- end -}}
{{- end -}}

{{/*
Labels and annotations that the chart adds to each CRD's metadata. The CRD bodies in
files/crds are byte-for-byte the generated deploy/crds files (python -m omed.api.crdgen), so
the chart inserts its metadata as text right under the top-level "metadata:" line.
*/}}
{{- define "ome-crd.metadata" -}}
labels:
  app.kubernetes.io/name: ome
  app.kubernetes.io/part-of: ome
  app.kubernetes.io/component: crd
  app.kubernetes.io/managed-by: {{ .Release.Service }}
  app.kubernetes.io/instance: {{ .Release.Name }}
  helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- if include "ome-crd.flag" (dict "root" . "key" "crds" "field" "keep" "default" true) }}
annotations:
  helm.sh/resource-policy: keep
{{- end }}
{{- end -}}

{{/*
A policy CRD: OME's alpha RolloutPolicy or AutoscalerPolicy. omed doesn't model these kinds;
it only needs the CRD to exist (the manager turns the feature on when it finds the CRD at
start) and objects of the kind to be storable, so the schema keeps unknown fields.
Arguments: dict "root" $ "kind" "RolloutPolicy" "plural" "rolloutpolicies" "singular" "rolloutpolicy".
*/}}
{{- define "ome-crd.policy" -}}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {{ .plural }}.ome.io
  {{- include "ome-crd.metadata" .root | nindent 2 }}
spec:
  group: ome.io
  names:
    kind: {{ .kind }}
    listKind: {{ .kind }}List
    plural: {{ .plural }}
    singular: {{ .singular }}
    categories:
    - ome
  scope: Namespaced
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        description: {{ printf "OME's alpha %s. omed stores it and validates references to it; the schema is open (unknown fields are kept)." .kind | quote }}
        type: object
        properties:
          apiVersion:
            type: string
          kind:
            type: string
          metadata:
            type: object
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
{{- end -}}
