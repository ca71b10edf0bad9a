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
The shape of the values, checked at the top of every template that reads them (helm renders
the templates in its own order, and each must fail with the same message): a bad value
fails `helm template`, `install` and `upgrade` with "<path> must be <what>, got <value as
JSON>", the form of the omenativeStatus messages, before anything reaches the cluster.
Values that only the manager can judge (a negative QPS, leader election timing, the
ConfigMap entries' fields) are passed as given: the manager's start-up checks own those
rules and their messages. docs/deploy.md lists every message.
*/}}
{{- define "ome.checkValues" -}}
{{- $ome := .Values.ome -}}
{{- if not (kindIs "map" $ome) -}}
{{- fail (printf "ome must be a map of the chart's values, got %s" (toJson $ome)) -}}
{{- end -}}
{{- $c := $ome.controller -}}
{{- if not (kindIs "map" $c) -}}
{{- fail (printf "ome.controller must be a map of the manager's values, got %s" (toJson $c)) -}}
{{- end -}}
{{- /* blocks: a map, or null */ -}}
{{- $maps := dict
  "leaderElection" "a map of leaseDuration, renewDeadline and retryPeriod, or null"
  "logging" "a map of encoder and level, or null"
  "eventRecorder" "a map of the eventRecorder entry's fields, or null"
  "lifecycle" "a map of the lifecycle entry's fields, or null"
  "deploy" "a map of the deploy entry's fields, or null"
  "ingress" "a map of the ingress entry's fields, or null"
  "extraConfig" "a map of ConfigMap entry names to JSON objects, or null"
  "resources" "a map of the manager container's resources, or null"
  "nodeSelector" "a map of node labels, or null"
  "affinity" "a map of the pod's affinity, or null"
  "podAnnotations" "a map of annotations, or null"
  "podLabels" "a map of labels, or null"
-}}
{{- range $key, $what := $maps -}}
{{- $value := index $c $key -}}
{{- if not (or (kindIs "invalid" $value) (kindIs "map" $value)) -}}
{{- fail (printf "ome.controller.%s must be %s, got %s" $key $what (toJson $value)) -}}
{{- end -}}
{{- end -}}
{{- /* lists of objects: a list of maps, or null */ -}}
{{- $lists := dict
  "extraEnv" (list "a list of environment variables, written like a container's env" "an environment variable such as {name: HTTPS_PROXY, value: ...}")
  "extraVolumes" (list "a list of volumes, written like a Pod's volumes" "a volume such as {name: corp-ca, configMap: {name: corp-ca-bundle}}")
  "extraVolumeMounts" (list "a list of volume mounts, written like a container's volumeMounts" "a volume mount such as {name: corp-ca, mountPath: /etc/corp-ca}")
  "imagePullSecrets" (list "a list of Secret references" "a Secret reference such as {name: my-pull-secret}")
  "tolerations" (list "a list of the pod's tolerations" "a toleration")
  "topologySpreadConstraints" (list "a list of the pod's topology spread constraints" "a topology spread constraint")
-}}
{{- range $key, $what := $lists -}}
{{- $value := index $c $key -}}
{{- if not (or (kindIs "invalid" $value) (kindIs "slice" $value)) -}}
{{- fail (printf "ome.controller.%s must be %s, or null, got %s" $key (index $what 0) (toJson $value)) -}}
{{- end -}}
{{- range $i, $item := $value | default list -}}
{{- if not (kindIs "map" $item) -}}
{{- fail (printf "ome.controller.%s[%d] must be a map, %s, got %s" $key $i (index $what 1) (toJson $item)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* the Deployment's numbers */ -}}
{{- $replicas := $c.replicaCount -}}
{{- if not (and (include "ome.isWhole" $replicas) (ge (float64 $replicas) 0.0)) -}}
{{- fail (printf "ome.controller.replicaCount must be a whole number, 0 or more, got %s" (toJson $replicas)) -}}
{{- end -}}
{{- $grace := $c.terminationGracePeriodSeconds -}}
{{- if not (or (kindIs "invalid" $grace) (and (include "ome.isWhole" $grace) (ge (float64 $grace) 0.0))) -}}
{{- fail (printf "ome.controller.terminationGracePeriodSeconds must be a whole number of seconds, 0 or more, or null, got %s" (toJson $grace)) -}}
{{- end -}}
{{- if not (or (kindIs "invalid" $c.priorityClassName) (kindIs "string" $c.priorityClassName)) -}}
{{- fail (printf "ome.controller.priorityClassName must be a string, got %s" (toJson $c.priorityClassName)) -}}
{{- end -}}
{{- /* the PodDisruptionBudget: values.schema.json checks the types; one of the two bounds */ -}}
{{- $pdb := $c.podDisruptionBudget | default dict -}}
{{- if $pdb.enabled -}}
{{- $min := not (kindIs "invalid" $pdb.minAvailable) -}}
{{- $max := not (kindIs "invalid" $pdb.maxUnavailable) -}}
{{- if and $min $max -}}
{{- fail (printf "ome.controller.podDisruptionBudget must set one of minAvailable and maxUnavailable, and the other to null, got %s" (toJson $pdb)) -}}
{{- else if not (or $min $max) -}}
{{- fail (printf "ome.controller.podDisruptionBudget must set minAvailable or maxUnavailable when enabled, got %s" (toJson $pdb)) -}}
{{- end -}}
{{- end -}}
{{- /* the image */ -}}
{{- $image := $c.image -}}
{{- if not (kindIs "map" $image) -}}
{{- fail (printf "ome.controller.image must be a map of repository, tag and pullPolicy, got %s" (toJson $image)) -}}
{{- end -}}
{{- if not (and (kindIs "string" $image.repository) $image.repository) -}}
{{- fail (printf "ome.controller.image.repository must be a non-empty string such as \"ome/ome-manager\", got %s" (toJson $image.repository)) -}}
{{- end -}}
{{- /* the manager's flags, and the omenativeStatus entry */ -}}
{{- $_ := include "ome.managerArgs" . -}}
{{- $_ = include "ome.omenativeStatusEntry" . -}}
{{- /* the policy features and the webhooks */ -}}
{{- range $key := list "rolloutPolicy" "autoscalerPolicy" -}}
{{- $feature := index $ome $key -}}
{{- if not (or (kindIs "invalid" $feature) (kindIs "map" $feature)) -}}
{{- fail (printf "ome.%s must be a map of enabled, or null, got %s" $key (toJson $feature)) -}}
{{- end -}}
{{- $enabled := ($feature | default dict).enabled -}}
{{- if not (or (kindIs "invalid" $enabled) (kindIs "bool" $enabled)) -}}
{{- fail (printf "ome.%s.enabled must be true or false, got %s" $key (toJson $enabled)) -}}
{{- end -}}
{{- end -}}
{{- $webhook := $ome.webhook -}}
{{- if not (or (kindIs "invalid" $webhook) (kindIs "map" $webhook)) -}}
{{- fail (printf "ome.webhook must be a map of certificate and timeoutSeconds, or null, got %s" (toJson $webhook)) -}}
{{- end -}}
{{- $timeout := ($webhook | default dict).timeoutSeconds -}}
{{- if not (or (kindIs "invalid" $timeout) (and (include "ome.isWhole" $timeout) (ge (float64 $timeout) 1.0) (le (float64 $timeout) 30.0))) -}}
{{- fail (printf "ome.webhook.timeoutSeconds must be a whole number of seconds from 1 to 30, got %s" (toJson $timeout)) -}}
{{- end -}}
{{- $_ = include "ome.webhookCertificate" . -}}
{{- end -}}

{{/*
Whether a policy feature is on: "true" or "false" (null is off).
*/}}
{{- define "ome.policyEnabled" -}}
{{- $feature := index .root.Values.ome .key | default dict -}}
{{- $feature.enabled | default false -}}
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
"true" when the value is a number: an integer from --set, or a float (Helm reads every
number of a values file as a float). Empty otherwise.
*/}}
{{- define "ome.isNumber" -}}
{{- if or (kindIs "int" .) (kindIs "int64" .) (kindIs "float64" .) -}}true{{- end -}}
{{- end -}}

{{/*
"true" when the value is a whole number (1, 1.0, -3), empty otherwise.
*/}}
{{- define "ome.isWhole" -}}
{{- if or (kindIs "int" .) (kindIs "int64" .) -}}
true
{{- else if kindIs "float64" . -}}
{{- if eq . (float64 (int64 .)) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/*
"true" when the value is a zero: the number 0, or a string that writes one ("0", "0.0",
"-0", "0e3"), as --set-string or a quoted "0" in a values file gives it. Empty otherwise.
*/}}
{{- define "ome.isZero" -}}
{{- if kindIs "string" . -}}
{{- if regexMatch "^[+-]?(0+(\\.0*)?|\\.0+)([eE][+-]?[0-9]+)?$" . -}}true{{- end -}}
{{- else if include "ome.isNumber" . -}}
{{- if eq (float64 .) 0.0 -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The manager's flags that values set, in their fixed order (docs/deploy.md): the flag, the
value's path, what the value is, and the example a message gives.
  number    a number, or a string that writes one (--set-string). Any zero, 0 or "0", leaves
            the flag out: a 0 doesn't remove a limit, the manager's default applies. Signs
            and fractions are the manager's to check.
  duration  a quoted duration. "0" is passed (configCacheTTL "0" turns the cache off); an
            unquoted 0 leaves the flag out; another number fails here, because the manager
            refuses a duration without a unit.
  list      a comma-separated string or a list.
  level     a log level as the manager reads --zap-log-level: debug, info, error or panic
            (any case), or a whole number above 0, quoted or not (more verbose debug).
*/}}
{{- define "ome.flagTable" -}}
{{- $c := .Values.ome.controller -}}
{{- $le := $c.leaderElection | default dict -}}
{{- $rows := list
  (list "inferenceservice-max-concurrent-reconciles" "inferenceServiceMaxConcurrentReconciles" "number" "")
  (list "inferencereplica-max-concurrent-reconciles" "inferenceReplicaMaxConcurrentReconciles" "number" "")
  (list "config-cache-ttl" "configCacheTTL" "duration" "30s")
  (list "accelerator-resources" "acceleratorResources" "list" "")
  (list "kube-api-qps" "kubeAPIQPS" "number" "")
  (list "kube-api-burst" "kubeAPIBurst" "number" "")
  (list "leader-elect-lease-duration" "leaderElection.leaseDuration" "duration" "60s")
  (list "leader-elect-renew-deadline" "leaderElection.renewDeadline" "duration" "40s")
  (list "leader-elect-retry-period" "leaderElection.retryPeriod" "duration" "8s")
  (list "zap-log-level" "logging.level" "level" "")
-}}
{{- $out := list -}}
{{- range $rows -}}
{{- $path := index . 1 -}}
{{- $value := "" -}}
{{- if hasPrefix "leaderElection." $path -}}
{{- $value = index $le (trimPrefix "leaderElection." $path) -}}
{{- else if hasPrefix "logging." $path -}}
{{- $value = index ($c.logging | default dict) (trimPrefix "logging." $path) -}}
{{- else -}}
{{- $value = index $c $path -}}
{{- end -}}
{{- $out = append $out (dict "flag" (index . 0) "path" (printf "ome.controller.%s" $path) "kind" (index . 2) "example" (index . 3) "value" $value) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
One flag of ome.flagTable as "--name=value", or empty when the value leaves the flag out
(null, false, empty, or a zero as the flag's kind says); fails on a value of the wrong kind.
*/}}
{{- define "ome.flagArg" -}}
{{- $value := .value -}}
{{- $shown := toJson $value -}}
{{- if eq .kind "number" -}}
{{- if and $value (not (include "ome.isZero" $value)) -}}
{{- if kindIs "string" $value -}}
{{- if not (regexMatch "^[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?$" $value) -}}
{{- fail (printf "%s must be a number, got %s" .path $shown) -}}
{{- end -}}
{{- else if not (include "ome.isNumber" $value) -}}
{{- fail (printf "%s must be a number, got %s" .path $shown) -}}
{{- end -}}
{{- printf "--%s=%s" .flag (include "ome.flagValue" $value) -}}
{{- end -}}
{{- else if eq .kind "duration" -}}
{{- if $value -}}
{{- if not (kindIs "string" $value) -}}
{{- fail (printf "%s must be a quoted duration such as \"%s\", got %s" .path .example $shown) -}}
{{- end -}}
{{- printf "--%s=%s" .flag $value -}}
{{- end -}}
{{- else if eq .kind "level" -}}
{{- if $value -}}
{{- $text := include "ome.flagValue" $value -}}
{{- $named := and (kindIs "string" $value) (has (lower $value) (list "debug" "info" "error" "panic")) -}}
{{- $verbosity := and (or (kindIs "string" $value) (include "ome.isWhole" $value)) (regexMatch "^[+]?0*[1-9][0-9]{0,17}$" $text) -}}
{{- if not (or $named $verbosity) -}}
{{- fail (printf "%s must be debug, info, error, panic or a whole number above 0, got %s" .path $shown) -}}
{{- end -}}
{{- printf "--%s=%s" .flag $text -}}
{{- end -}}
{{- else -}}
{{- if $value -}}
{{- if not (or (kindIs "string" $value) (kindIs "slice" $value)) -}}
{{- fail (printf "%s must be a comma-separated string or a list of resource names, got %s" .path $shown) -}}
{{- end -}}
{{- printf "--%s=%s" .flag (include "ome.flagValue" $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The manager's arguments, in their fixed order (docs/deploy.md). The first four are always
there. A value-driven flag is left out when its value is null, false,
empty or a zero (ome.flagTable says which zeros), and the manager then runs with its own
default: so configCacheTTL "0" gives --config-cache-ttl=0, and an unquoted 0 leaves the
flag out, while kubeAPIQPS 0 and "0" both leave the flag out.
*/}}
{{- define "ome.logEncoder" -}}
{{- $encoder := (.Values.ome.controller.logging | default dict).encoder | default "console" -}}
{{- if not (has $encoder (list "console" "json")) -}}
{{- fail (printf "ome.controller.logging.encoder must be console or json, got %s" (toJson $encoder)) -}}
{{- end -}}
{{- $encoder -}}
{{- end -}}

{{- define "ome.managerArgs" -}}
- --metrics-bind-address=:8080
- --leader-elect
- --webhook
- --zap-encoder={{ include "ome.logEncoder" . }}
{{- range include "ome.flagTable" . | fromJsonArray }}
{{- with include "ome.flagArg" . }}
- {{ . | quote }}
{{- end }}
{{- end }}
{{- with include "ome.gracefulShutdownArg" . }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
--graceful-shutdown-timeout from terminationGracePeriodSeconds, so the manager ends its stop
before the kubelet's SIGKILL: 5 s less (half of a period under 10 s). Left out for 30 and for
null (Kubernetes' default, also 30): the manager's own default, 25s, is that value already,
and the default argument list stays the one docs/deploy.md shows.
*/}}
{{- define "ome.gracefulShutdownArg" -}}
{{- $grace := .Values.ome.controller.terminationGracePeriodSeconds -}}
{{- if not (kindIs "invalid" $grace) -}}
{{- $seconds := int64 $grace -}}
{{- if ne $seconds 30 -}}
{{- $timeout := ternary (sub $seconds 5) (div $seconds 2) (ge $seconds 10) -}}
{{- printf "--graceful-shutdown-timeout=%ds" $timeout -}}
{{- end -}}
{{- end -}}
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
cluster, with one of three messages. A missing block (null) is a missing
instanceStatusEncoding, the first of them; a block that isn't a map gets a message of the
same form.
*/}}
{{- define "ome.omenativeStatusEntry" -}}
{{- $block := .Values.ome.controller.omenativeStatus -}}
{{- if kindIs "invalid" $block -}}
{{- $block = dict -}}
{{- else if not (kindIs "map" $block) -}}
{{- fail (printf "ome.controller.omenativeStatus must be a map of instanceStatusEncoding and maxDecodedInstances, got %s" (toJson $block)) -}}
{{- end -}}
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
{{- $mode := (.Values.ome.webhook | default dict).certificate | default "auto" -}}
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
    - apiGroups: [{{ .apiGroup | default "ome.io" | quote }}]
      apiVersions: [{{ .apiVersion | default "v1beta1" | quote }}]
      operations: {{ .operations | default (list "CREATE" "UPDATE") | toJson }}
      resources: [{{ .resource | quote }}]
      scope: Namespaced
  {{- with .objectSelector }}
  objectSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
