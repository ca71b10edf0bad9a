{{/*
Names that the manager, its docs and its users rely on: they are fixed, not derived from
the release name (docs/deploy.md).
*/}}
{{- define "ome.deploymentName" -}}ome-controller-manager{{- end -}}
{{- define "ome.serviceAccountName" -}}ome-controller-manager{{- end -}}
{{- define "ome.webhookSecretName" -}}ome-webhook-server-cert{{- end -}}
{{- define "ome.webhookServiceName" -}}ome-webhook-server-service{{- end -}}
{{- define "ome.leaseName" -}}ome-controller-manager-leader-lock{{- end -}}
{{- define "ome.configMapName" -}}inferenceservice-config{{- end -}}

{{- define "ome.labels" -}}
app.kubernetes.io/name: ome
app.kubernetes.io/part-of: ome
app.kubernetes.io/component: controller-manager
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "ome.selectorLabels" -}}
control-plane: ome-controller-manager
{{- end -}}

{{- define "ome.image" -}}
{{- $image := .Values.ome.controller.image -}}
{{- printf "%s:%s" $image.repository (toString ($image.tag | default .Chart.AppVersion)) -}}
{{- end -}}

{{/*
A value as a flag's text: a list is joined with commas, and a whole number is written as
an integer (Helm reads every number of a values file as a float, and would print 1000000
as 1e+06, which an int flag refuses).
*/}}
{{- define "ome.flagValue" -}}
{{- if kindIs "slice" . -}}
{{- join "," . -}}
{{- else if and (kindIs "float64" .) (eq . (float64 (int64 .))) -}}
{{- int64 . -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/*
The manager's arguments, in the order of the product page "Configure the controller". The
first four are always there. A value-driven flag is left out when its value is null, an
unquoted 0, false or empty, and the manager then runs with its own default: so
configCacheTTL "0" gives --config-cache-ttl=0, and an unquoted 0 leaves the flag out.
*/}}
{{- define "ome.managerArgs" -}}
{{- $c := .Values.ome.controller -}}
{{- $le := $c.leaderElection | default dict -}}
{{- $flags := list
  (list "inferenceservice-max-concurrent-reconciles" $c.inferenceServiceMaxConcurrentReconciles)
  (list "inferencereplica-max-concurrent-reconciles" $c.inferenceReplicaMaxConcurrentReconciles)
  (list "config-cache-ttl" $c.configCacheTTL)
  (list "accelerator-resources" $c.acceleratorResources)
  (list "kube-api-qps" $c.kubeAPIQPS)
  (list "kube-api-burst" $c.kubeAPIBurst)
  (list "leader-elect-lease-duration" $le.leaseDuration)
  (list "leader-elect-renew-deadline" $le.renewDeadline)
  (list "leader-elect-retry-period" $le.retryPeriod)
-}}
- --metrics-bind-address=:8080
- --leader-elect
- --webhook
- --zap-encoder=console
{{- range $flags }}
{{- $value := index . 1 }}
{{- if $value }}
- {{ printf "--%s=%s" (index . 0) (include "ome.flagValue" $value) | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
A map without its null fields, as JSON; a nested map is pruned the same way and left out
when nothing is left of it. Helm drops a key that a user's values file sets to null, and
keeps a null of the chart's own values.yaml: both end up out of the entry.
*/}}
{{- define "ome.pruneJson" -}}
{{- $out := dict -}}
{{- range $key, $value := . -}}
{{- if kindIs "map" $value -}}
{{- $inner := include "ome.pruneJson" $value | fromJson -}}
{{- if $inner -}}
{{- $_ := set $out $key $inner -}}
{{- end -}}
{{- else if not (kindIs "invalid" $value) -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
The omenativeStatus entry, checked first: helm refuses a bad block before it changes the
cluster, with the product page's three messages.
*/}}
{{- define "ome.omenativeStatusEntry" -}}
{{- $block := .Values.ome.controller.omenativeStatus | default dict -}}
{{- $encoding := $block.instanceStatusEncoding -}}
{{- if not (has $encoding (list "DenseV1" "ColumnarV2")) -}}
{{- $shown := ternary "\"\"" (quote $encoding) (kindIs "invalid" $encoding) -}}
{{- fail (printf "ome.controller.omenativeStatus.instanceStatusEncoding must be DenseV1 or ColumnarV2, got %s" $shown) -}}
{{- end -}}
{{- $bound := $block.maxDecodedInstances -}}
{{- if kindIs "invalid" $bound -}}
{{- if eq $encoding "ColumnarV2" -}}
{{- fail "ome.controller.omenativeStatus.maxDecodedInstances is required when instanceStatusEncoding is ColumnarV2" -}}
{{- end -}}
{{- else -}}
{{- $positive := false -}}
{{- if or (kindIs "int" $bound) (kindIs "int64" $bound) -}}
{{- $positive = gt (int64 $bound) 0 -}}
{{- else if kindIs "float64" $bound -}}
{{- $positive = and (gt $bound 0.0) (eq $bound (float64 (int64 $bound))) -}}
{{- end -}}
{{- if not $positive -}}
{{- fail (printf "ome.controller.omenativeStatus.maxDecodedInstances must be a positive integer, got %s" (toJson $bound)) -}}
{{- end -}}
{{- end -}}
{{- include "ome.pruneJson" $block | fromJson | toPrettyJson -}}
{{- end -}}

{{/*
Where the webhook serving certificate comes from: certManager or selfSigned.
*/}}
{{- define "ome.webhookCertificate" -}}
{{- $mode := .Values.ome.webhook.certificate | default "auto" -}}
{{- if eq $mode "auto" -}}
{{- ternary "certManager" "selfSigned" (.Capabilities.APIVersions.Has "cert-manager.io/v1") -}}
{{- else if has $mode (list "certManager" "selfSigned") -}}
{{- $mode -}}
{{- else -}}
{{- fail (printf "ome.webhook.certificate must be auto, certManager or selfSigned, got %q" (toString $mode)) -}}
{{- end -}}
{{- end -}}

{{/*
One webhook of a Validating- or MutatingWebhookConfiguration: only the main resource (status
writes never reach it), CREATE and UPDATE, failurePolicy Fail (docs/webhooks.md).
*/}}
{{- define "ome.webhook" -}}
- name: {{ .name }}
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  matchPolicy: Equivalent
  timeoutSeconds: {{ .timeout }}
  {{- if .mutating }}
  reinvocationPolicy: Never
  {{- end }}
  clientConfig:
    service:
      name: {{ .service }}
      namespace: {{ .namespace }}
      path: {{ .path }}
      port: 443
    {{- if .caBundle }}
    caBundle: {{ .caBundle }}
    {{- end }}
  rules:
    - apiGroups: ["ome.io"]
      apiVersions: ["v1beta1"]
      operations: ["CREATE", "UPDATE"]
      resources: [{{ .resource | quote }}]
      scope: Namespaced
{{- end -}}
