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
{{- if .Values.ome.crds.keep }}
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
