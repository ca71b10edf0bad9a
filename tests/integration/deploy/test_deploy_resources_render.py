"""The ome-resources chart, rendered by the real helm: the manager's arguments, environment,
volumes and security settings, the ConfigMap entries (parsed by omed.config, so chart and
manager agree), the webhooks and their certificate, and the failure messages users see."""

from __future__ import annotations

import base64
import json
import re
import ssl
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from omed.config import (
    FlagError,
    Percent,
    check_leader_election_timing,
    load_startup_config,
    parse_flags,
    reconcile_entries,
)
from omed.config.disruption import InstancePercent, disruption_budget_entry
from omed.webhooks import controllerrevision, defaulting, inferencereplica, inferenceservice
from omed.webhooks.tls import new_server_context

from .charts import (
    CHARTS,
    CRD_CHART,
    RESOURCES_CHART,
    ROOT,
    Render,
    RenderError,
    failure_message,
    find,
    run_helm,
)

pytestmark = pytest.mark.integration

# The manager's arguments with the chart's defaults, in their fixed order
# (inferenceServiceMaxConcurrentReconciles: the chart's 4).
DEFAULT_ARGS = [
    "--metrics-bind-address=:8080",
    "--leader-elect",
    "--webhook",
    "--zap-encoder=console",
    "--inferenceservice-max-concurrent-reconciles=4",
    "--inferencereplica-max-concurrent-reconciles=4",
    "--config-cache-ttl=30s",
    "--accelerator-resources=nvidia.com/gpu,google.com/tpu",
    "--kube-api-qps=100",
    "--kube-api-burst=200",
    "--leader-elect-lease-duration=60s",
    "--leader-elect-renew-deadline=40s",
    "--leader-elect-retry-period=8s",
]
PAGE_STEP_2 = [
    "--metrics-bind-address=:8080",
    "--leader-elect",
    "--webhook",
    "--zap-encoder=console",
    "--inferenceservice-max-concurrent-reconciles=8",
    "--inferencereplica-max-concurrent-reconciles=4",
    "--config-cache-ttl=30s",
    "--accelerator-resources=nvidia.com/gpu,google.com/tpu",
    "--kube-api-qps=100",
    "--kube-api-burst=200",
    "--leader-elect-lease-duration=60s",
    "--leader-elect-renew-deadline=40s",
    "--leader-elect-retry-period=8s",
]

# A proxy and a private CA bundle, set through extraEnv, extraVolumes and extraVolumeMounts.
PROXY_VALUES: dict[str, Any] = {
    "extraEnv": [
        {"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"},
        {"name": "NO_PROXY", "value": "10.0.0.0/8,.svc,.cluster.local"},
        {"name": "SSL_CERT_FILE", "value": "/etc/corp-ca/ca-bundle.crt"},
    ],
    "extraVolumes": [{"name": "corp-ca", "configMap": {"name": "corp-ca-bundle"}}],
    "extraVolumeMounts": [{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}],
}

MSG_ENCODING = (
    "ome.controller.omenativeStatus.instanceStatusEncoding must be DenseV1 or ColumnarV2, got {}"
)
MSG_BOUND = "ome.controller.omenativeStatus.maxDecodedInstances must be a positive integer, got {}"
MSG_BOUND_REQUIRED = (
    "ome.controller.omenativeStatus.maxDecodedInstances is required when "
    "instanceStatusEncoding is ColumnarV2"
)

REGISTRY_HOSTS = re.compile(
    r"ghcr\.io|docker\.io|quay\.io|gcr\.io|ocir\.io|amazonaws\.com|azurecr\.io|"
    r"registry\.k8s\.io|nvcr\.io|docker\.pkg\.dev|registry\.gitlab\.com"
)


def controller(**values: Any) -> dict[str, Any]:
    return {"ome": {"controller": values}}


def manager(docs: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = find(docs, "Deployment", "ome-controller-manager")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "manager"
    return container


def args(docs: list[dict[str, Any]]) -> list[str]:
    return list(manager(docs)["args"])


def config_data(docs: list[dict[str, Any]]) -> dict[str, str]:
    data = find(docs, "ConfigMap", "inferenceservice-config")["data"]
    assert all(isinstance(v, str) for v in data.values())
    return dict(data)


# --- lint ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("ome.controller.omenativeStatus.instanceStatusEncoding=DenseV1",),
        ("ome.webhook.certificate=certManager", "ome.rolloutPolicy.enabled=true"),
        ("ome.controller.extraEnv[0].name=HTTPS_PROXY", "ome.controller.extraEnv[0].value=x"),
    ],
    ids=["defaults", "dense", "cert-manager", "extra-env"],
)
def test_helm_lint(helm: str, sets: tuple[str, ...]) -> None:
    command = ["lint", "--strict", str(RESOURCES_CHART)]
    for item in sets:
        command += ["--set", item]
    result = run_helm(helm, command)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


# --- arguments -------------------------------------------------------------------------------


def test_default_args_are_the_pages_list(render: Render) -> None:
    assert args(render()) == DEFAULT_ARGS


def test_page_step_1_example_gives_the_page_step_2_output(render: Render) -> None:
    docs = render(controller(inferenceServiceMaxConcurrentReconciles=8))
    assert args(docs) == PAGE_STEP_2


def test_default_args_parse_with_the_manager_flags(render: Render) -> None:
    options = parse_flags(args(render()), {"POD_NAMESPACE": "ome"})
    check_leader_election_timing(options)
    assert options.metrics_bind_address == ":8080"
    assert options.leader_elect and options.webhook
    assert options.zap_encoder == "console"
    assert options.inferenceservice_max_concurrent_reconciles == 4
    assert options.inferencereplica_max_concurrent_reconciles == 4
    assert options.config_cache_ttl == 30.0
    assert options.accelerator_resources == ("nvidia.com/gpu", "google.com/tpu")
    assert (options.kube_api_qps, options.kube_api_burst) == (100.0, 200)
    assert (
        options.leader_elect_lease_duration,
        options.leader_elect_renew_deadline,
        options.leader_elect_retry_period,
    ) == (60.0, 40.0, 8.0)
    # the chart relies on these manager defaults, which the Deployment's ports, probes and
    # volume mounts match
    assert options.health_probe_addr == ":8081"
    assert options.webhook_port == 9443
    assert options.webhook_cert_dir == "/tmp/k8s-webhook-server/serving-certs"


def changed(**flags: str | None) -> list[str]:
    """DEFAULT_ARGS with some flags' values changed, in place; None leaves a flag out.
    Flag names are written with _ for -."""
    wanted = {name.replace("_", "-"): value for name, value in flags.items()}
    result = []
    for arg in DEFAULT_ARGS:
        name = arg[2:].split("=", 1)[0]
        if name not in wanted:
            result.append(arg)
        elif wanted[name] is not None:
            result.append(f"--{name}={wanted[name]}")
    return result


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # "a 0 doesn't remove a limit: the chart then leaves the flag out"
        (controller(kubeAPIQPS=0), changed(kube_api_qps=None)),
        (controller(kubeAPIBurst=0), changed(kube_api_burst=None)),
        # ... and a quoted "0" is the same 0 (the manager refuses --kube-api-qps=0)
        (controller(kubeAPIQPS="0"), changed(kube_api_qps=None)),
        (controller(kubeAPIBurst="0"), changed(kube_api_burst=None)),
        (
            controller(kubeAPIQPS="0.0", kubeAPIBurst="-0"),
            changed(kube_api_qps=None, kube_api_burst=None),
        ),
        (controller(kubeAPIBurst="250"), changed(kube_api_burst="250")),
        (
            controller(inferenceServiceMaxConcurrentReconciles="0"),
            changed(inferenceservice_max_concurrent_reconciles=None),
        ),
        # '"0" turns the cache off ... for an unquoted 0, the chart leaves out the flag'
        (controller(configCacheTTL="0"), changed(config_cache_ttl="0")),
        (controller(configCacheTTL=0), changed(config_cache_ttl=None)),
        (controller(configCacheTTL="10s"), changed(config_cache_ttl="10s")),
        # one of the pair alone: the other keeps the chart's default
        (controller(kubeAPIQPS=200), changed(kube_api_qps="200")),
        (
            controller(kubeAPIQPS=200, kubeAPIBurst=400),
            changed(kube_api_qps="200", kube_api_burst="400"),
        ),
        (controller(kubeAPIQPS=0.5), changed(kube_api_qps="0.5")),
        # helm reads a values file's numbers as floats: a large one stays an integer
        (controller(kubeAPIBurst=1000000), changed(kube_api_burst="1000000")),
        (
            controller(inferenceReplicaMaxConcurrentReconciles=0),
            changed(inferencereplica_max_concurrent_reconciles=None),
        ),
        (
            controller(acceleratorResources=["nvidia.com/gpu"]),
            changed(accelerator_resources="nvidia.com/gpu"),
        ),
        (controller(acceleratorResources=None), changed(accelerator_resources=None)),
        (
            controller(
                leaderElection={
                    "leaseDuration": "90s",
                    "renewDeadline": "60s",
                    "retryPeriod": "12s",
                }
            ),
            changed(
                leader_elect_lease_duration="90s",
                leader_elect_renew_deadline="60s",
                leader_elect_retry_period="12s",
            ),
        ),
        (
            controller(leaderElection=None),
            changed(
                leader_elect_lease_duration=None,
                leader_elect_renew_deadline=None,
                leader_elect_retry_period=None,
            ),
        ),
    ],
    ids=[
        "qps-0",
        "burst-0",
        "qps-quoted-0",
        "burst-quoted-0",
        "quoted-zeros",
        "burst-quoted-250",
        "workers-quoted-0",
        "ttl-quoted-0",
        "ttl-unquoted-0",
        "ttl-10s",
        "qps-alone",
        "qps-and-burst",
        "qps-float",
        "burst-large",
        "workers-0",
        "accelerators-list",
        "accelerators-null",
        "leader-election",
        "leader-election-null",
    ],
)
def test_args_from_values(render: Render, values: dict[str, Any], expected: list[str]) -> None:
    rendered = args(render(values))
    assert rendered == expected
    parse_flags(rendered, {})  # the manager accepts what the chart passes


@pytest.mark.parametrize(
    ("sets", "set_strings", "expected"),
    [
        (["ome.controller.configCacheTTL=0"], [], changed(config_cache_ttl=None)),
        ([], ["ome.controller.configCacheTTL=0"], changed(config_cache_ttl="0")),
        (
            ["ome.controller.kubeAPIQPS=0", "ome.controller.kubeAPIBurst=0"],
            [],
            changed(kube_api_qps=None, kube_api_burst=None),
        ),
        (
            [],
            ["ome.controller.kubeAPIQPS=0", "ome.controller.kubeAPIBurst=0"],
            changed(kube_api_qps=None, kube_api_burst=None),
        ),
        ([], ["ome.controller.kubeAPIQPS=150"], changed(kube_api_qps="150")),
    ],
    ids=[
        "set-ttl-0",
        "set-string-ttl-0",
        "set-qps-burst-0",
        "set-string-qps-burst-0",
        "set-string-qps-150",
    ],
)
def test_args_from_set_flags(
    render: Render, sets: list[str], set_strings: list[str], expected: list[str]
) -> None:
    rendered = args(render(sets=sets, set_strings=set_strings))
    assert rendered == expected
    parse_flags(rendered, {})  # the manager accepts what the chart passes


def test_a_quoted_zero_limit_falls_back_to_the_managers_defaults(render: Render) -> None:
    """A 0 doesn't remove a limit: the chart then leaves the flag out, and the manager falls
    back to 20 requests a second, or a burst of 30. The manager refuses a
    passed 0 (exit 2, a crash loop), so a quoted "0" must not reach it either."""
    with pytest.raises(FlagError):
        parse_flags(["--kube-api-qps=0"], {})
    with pytest.raises(FlagError):
        parse_flags(["--kube-api-burst=0"], {})
    rendered = args(
        render(set_strings=["ome.controller.kubeAPIQPS=0", "ome.controller.kubeAPIBurst=0"])
    )
    options = parse_flags(rendered, {})
    assert (options.kube_api_qps, options.kube_api_burst) == (20.0, 30)


# --- environment, volumes, pod ---------------------------------------------------------------


def test_default_env(render: Render) -> None:
    env = manager(render())["env"]
    assert env == [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "SECRET_NAME", "value": "ome-webhook-server-cert"},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]


def test_extra_env_volumes_and_mounts_follow_the_charts_own(render: Render) -> None:
    container = manager(render(controller(**PROXY_VALUES)))
    # The chart's two variables come first, and the extraEnv entries follow them; POD_NAME
    # comes last (docs/deploy.md).
    assert [e["name"] for e in container["env"]] == [
        "POD_NAMESPACE",
        "SECRET_NAME",
        "HTTPS_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "POD_NAME",
    ]
    assert container["env"][2:5] == PROXY_VALUES["extraEnv"]
    assert container["volumeMounts"] == [
        {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs", "readOnly": True},
        *PROXY_VALUES["extraVolumeMounts"],
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    pod = find(render(controller(**PROXY_VALUES)), "Deployment")["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "cert", "secret": {"secretName": "ome-webhook-server-cert", "defaultMode": 0o440}},
        *PROXY_VALUES["extraVolumes"],
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]


def test_extra_env_accepts_value_from(render: Render) -> None:
    extra = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    assert manager(render(controller(extraEnv=extra)))["env"][2] == extra[0]


def test_deployment(render: Render) -> None:
    docs = render()
    deployment = find(docs, "Deployment", "ome-controller-manager")
    assert deployment["metadata"]["namespace"] == "ome"
    assert deployment["metadata"]["labels"]["control-plane"] == "ome-controller-manager"
    spec = deployment["spec"]
    assert spec["replicas"] == 3
    assert spec["selector"] == {"matchLabels": {"control-plane": "ome-controller-manager"}}
    assert spec["template"]["metadata"]["labels"]["control-plane"] == "ome-controller-manager"
    # the Deployment replaces its pods one at a time
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "ome-controller-manager"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    container = manager(docs)
    assert container["image"] == "ome/ome-manager:v1.3.0"
    assert {(p["name"], p["containerPort"]) for p in container["ports"]} == {
        ("metrics", 8080),
        ("webhook-server", 9443),
        ("health", 8081),
    }
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8081}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8081}
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ({"tag": "v1.3.1"}, "ome/ome-manager:v1.3.1"),
        (
            {"repository": "mirror.internal/ome/ome-manager"},
            "mirror.internal/ome/ome-manager:v1.3.0",
        ),
    ],
)
def test_image_values(render: Render, image: dict[str, str], expected: str) -> None:
    assert manager(render(controller(image=image)))["image"] == expected


def test_replica_count(render: Render) -> None:
    deployment = find(render(controller(replicaCount=1)), "Deployment")
    assert deployment["spec"]["replicas"] == 1


def test_config_or_policy_changes_roll_the_pods(render: Render) -> None:
    def annotations(values: dict[str, Any]) -> dict[str, str]:
        pod = find(render(values), "Deployment")["spec"]["template"]
        return dict(pod["metadata"]["annotations"])

    default = annotations({})
    assert default["ome.io/policy-features"] == "rolloutPolicy=false,autoscalerPolicy=false"
    changed = annotations(controller(eventRecorder={"burstSize": 800}))
    assert changed["checksum/config"] != default["checksum/config"]
    assert annotations(controller(kubeAPIQPS=5))["checksum/config"] == default["checksum/config"]
    policy = annotations({"ome": {"rolloutPolicy": {"enabled": True}}})
    assert policy["ome.io/policy-features"] == "rolloutPolicy=true,autoscalerPolicy=false"


def test_services(render: Render) -> None:
    docs = render()
    webhook = find(docs, "Service", "ome-webhook-server-service")
    assert webhook["spec"]["selector"] == {"control-plane": "ome-controller-manager"}
    assert webhook["spec"]["ports"] == [
        {"name": "https-webhook", "port": 443, "targetPort": "webhook-server", "protocol": "TCP"}
    ]
    metrics = find(docs, "Service", "ome-controller-manager-metrics-service")
    assert metrics["spec"]["ports"][0]["port"] == 8080
    assert metrics["spec"]["ports"][0]["targetPort"] == "metrics"


# --- the omenativeStatus check ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ({"instanceStatusEncoding": "Dense"}, MSG_ENCODING.format('"Dense"')),
        ({"instanceStatusEncoding": "columnarv2"}, MSG_ENCODING.format('"columnarv2"')),
        ({"instanceStatusEncoding": None}, MSG_ENCODING.format('""')),
        ({"instanceStatusEncoding": 2}, MSG_ENCODING.format('"2"')),
        ({"maxDecodedInstances": 0}, MSG_BOUND.format("0")),
        ({"maxDecodedInstances": -5}, MSG_BOUND.format("-5")),
        ({"maxDecodedInstances": 2.5}, MSG_BOUND.format("2.5")),
        ({"maxDecodedInstances": "20000"}, MSG_BOUND.format('"20000"')),
        ({"maxDecodedInstances": True}, MSG_BOUND.format("true")),
        (
            {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 0},
            MSG_BOUND.format("0"),
        ),
        ({"maxDecodedInstances": None}, MSG_BOUND_REQUIRED),
        ({"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": None}, MSG_BOUND_REQUIRED),
        # a missing block is a missing encoding
        (None, MSG_ENCODING.format('""')),
    ],
)
def test_bad_omenative_status_fails_with_the_pages_message(
    render_error: RenderError, status: dict[str, Any] | None, message: str
) -> None:
    stderr = render_error(values=controller(omenativeStatus=status))
    assert "can't evaluate field" not in stderr and "nil pointer" not in stderr, stderr
    assert failure_message(stderr) == message


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["ome.controller.omenativeStatus.instanceStatusEncoding=DenseV2"],
            MSG_ENCODING.format('"DenseV2"'),
        ),
        (["ome.controller.omenativeStatus.maxDecodedInstances=0"], MSG_BOUND.format("0")),
        (["ome.controller.omenativeStatus.maxDecodedInstances=null"], MSG_BOUND_REQUIRED),
        (["ome.controller.omenativeStatus=null"], MSG_ENCODING.format('""')),
    ],
)
def test_bad_omenative_status_from_set_flags(
    render_error: RenderError, sets: list[str], message: str
) -> None:
    assert failure_message(render_error(sets=sets)) == message


# --- the ConfigMap ---------------------------------------------------------------------------


def test_default_entries_load_in_the_manager(render: Render) -> None:
    data = config_data(render())
    assert set(data) == {
        "deploy",
        "ingress",
        "lifecycle",
        "omenativeStatus",
        "eventRecorder",
        "podDisruptionBudget",
    }
    assert data["podDisruptionBudget"] == '{"omeNative":{"maxUnavailable":1}}'
    budget = disruption_budget_entry(data)
    assert budget is not None
    assert (budget.min_available, budget.max_unavailable) == (None, 1)
    startup = load_startup_config(data)
    assert startup.omenative_status.instance_status_encoding == "ColumnarV2"
    assert startup.omenative_status.max_decoded_instances == 20000
    assert (startup.event_recorder.burst_size, startup.event_recorder.refill_interval) == (400, 5.0)
    scale = startup.lifecycle_scale
    assert scale.scale_up_pod_batch_size == 100
    assert scale.scale_down_pod_batch_size == 100
    assert scale.scale_down_requeue_interval == 5.0
    assert scale.repair_batch_size == Percent(10)
    assert startup.enable_gateway_api is False
    reconcile = reconcile_entries(data)
    lifecycle = reconcile.lifecycle
    assert lifecycle.audit_problem is None
    assert lifecycle.audit is not None
    assert (
        lifecycle.audit.max_in_flight_migrations,
        lifecycle.audit.max_migrations_per_window,
        lifecycle.audit.window,
    ) == (3, 10, 3600.0)
    assert (lifecycle.requeue.operation, lifecycle.requeue.gate) == (5.0, 3.0)
    assert lifecycle.instance_ready_timeout == 1800.0
    assert lifecycle.problems == ()
    assert (lifecycle.stuck_pod_grace_period, lifecycle.unschedulable_grace_period) == (60.0, 900.0)
    assert lifecycle.auto_migrate.max_attempts == 3
    assert lifecycle.teardown.deadline == 1800.0
    assert (lifecycle.gang_schedule_timeout.min, lifecycle.gang_schedule_timeout.max) == (
        60.0,
        600.0,
    )
    assert lifecycle.force_delete.overdue_slack is None  # unset, as upstream's chart leaves it
    assert reconcile.deploy.default_deployment_mode is None
    assert reconcile.ingress.url_scheme == "http"


def test_component_pod_disruption_budget_values(render: Render) -> None:
    # A percentage of minAvailable, the other bound null and left out; null: no entry.
    data = config_data(
        render(
            controller(
                componentPodDisruptionBudget={
                    "omeNative": {"minAvailable": "50%", "maxUnavailable": None}
                }
            )
        )
    )
    assert data["podDisruptionBudget"] == '{"omeNative":{"minAvailable":"50%"}}'
    budget = disruption_budget_entry(data)
    assert budget is not None
    assert (budget.min_available, budget.max_unavailable) == (InstancePercent(50), None)
    assert "podDisruptionBudget" not in config_data(
        render(controller(componentPodDisruptionBudget=None))
    )


def test_omenative_status_entry_prints_as_the_page_shows(render: Render) -> None:
    # "On a default installation, it prints:"
    assert config_data(render())["omenativeStatus"] == (
        '{\n  "instanceStatusEncoding": "ColumnarV2",\n  "maxDecodedInstances": 20000\n}'
    )


def test_dense_v1_without_a_bound(render: Render) -> None:
    values = controller(
        omenativeStatus={"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": None}
    )
    data = config_data(render(values))
    assert json.loads(data["omenativeStatus"]) == {"instanceStatusEncoding": "DenseV1"}
    status = load_startup_config(data).omenative_status
    assert (status.instance_status_encoding, status.decode_bound) == ("DenseV1", 0)


def test_event_recorder_example_renders_as_the_page_shows(render: Render) -> None:
    data = config_data(render(controller(eventRecorder={"burstSize": 800, "refillInterval": "2s"})))
    assert data["eventRecorder"] == '{"burstSize":800,"refillInterval":"2s"}'
    recorder = load_startup_config(data).event_recorder
    assert (recorder.burst_size, recorder.refill_interval) == (800, 2.0)


@pytest.mark.parametrize(
    ("fields", "entry", "burst", "refill"),
    [
        ({"burstSize": None}, {"refillInterval": "5s"}, 25, 5.0),
        ({"refillInterval": None}, {"burstSize": 400}, 400, 300.0),
        ({"burstSize": None, "refillInterval": None}, {}, 25, 300.0),
    ],
)
def test_null_event_recorder_fields_are_left_out(
    render: Render, fields: dict[str, Any], entry: dict[str, Any], burst: int, refill: float
) -> None:
    data = config_data(render(controller(eventRecorder=fields)))
    assert json.loads(data["eventRecorder"]) == entry
    recorder = load_startup_config(data).event_recorder
    assert (recorder.burst_size, recorder.refill_interval) == (burst, refill)


def test_lifecycle_example(render: Render) -> None:
    values = controller(lifecycle={"scaleUpPodBatchSize": 50, "scaleDownPodBatchSize": "10%"})
    data = config_data(render(values))
    entry = json.loads(data["lifecycle"])
    # the three keys an operator checks after setting the batch sizes
    assert {
        k: entry[k]
        for k in ("scaleUpPodBatchSize", "scaleDownPodBatchSize", "scaleDownRequeueInterval")
    } == {
        "scaleUpPodBatchSize": 50,
        "scaleDownPodBatchSize": "10%",
        "scaleDownRequeueInterval": "5s",
    }
    scale = load_startup_config(data).lifecycle_scale
    assert (scale.scale_up_pod_batch_size, scale.scale_down_pod_batch_size) == (50, Percent(10))
    # the values not set keep the chart's defaults
    assert entry["audit"] == {
        "maxInFlightMigrations": 3,
        "maxMigrationsPerWindow": 10,
        "window": "1h",
    }


def test_null_lifecycle_fields_are_left_out(render: Render) -> None:
    values = controller(
        lifecycle={
            "scaleUpPodBatchSize": None,
            "scaleDownRequeueInterval": None,
            "audit": {
                "maxInFlightMigrations": None,
                "maxMigrationsPerWindow": None,
                "window": None,
            },
            "requeue": {"gate": None},
        }
    )
    data = config_data(render(values))
    entry = json.loads(data["lifecycle"])
    assert "scaleUpPodBatchSize" not in entry
    assert "scaleDownRequeueInterval" not in entry
    assert "audit" not in entry
    assert entry["requeue"] == {"operation": "5s"}
    scale = load_startup_config(data).lifecycle_scale
    assert scale.scale_up_pod_batch_size is None
    assert scale.scale_down_requeue_interval is None
    lifecycle = reconcile_entries(data).lifecycle
    assert lifecycle.audit is None
    assert lifecycle.audit_problem == "lifecycle.audit is not set"


def test_deploy_and_ingress_values(render: Render) -> None:
    values = controller(
        deploy={
            "defaultDeploymentMode": "OMENative",
            "replicas": {"minReplicas": 1, "maxReplicas": 4},
        },
        ingress={"enableGatewayAPI": True, "ingressDomain": "example.com"},
    )
    data = config_data(render(values))
    reconcile = reconcile_entries(data)
    assert reconcile.deploy.default_deployment_mode == "OMENative"
    assert reconcile.deploy.replicas is not None
    assert (reconcile.deploy.replicas.min_replicas, reconcile.deploy.replicas.max_replicas) == (
        1,
        4,
    )
    assert reconcile.ingress.ingress_domain == "example.com"
    assert load_startup_config(data).enable_gateway_api is True


def test_extra_config_entries(render: Render, render_error: RenderError) -> None:
    values = controller(extraConfig={"omeAgent": {"image": "ome/ome-agent:v1.3.0"}})
    data = config_data(render(values))
    assert json.loads(data["omeAgent"]) == {"image": "ome/ome-agent:v1.3.0"}
    assert load_startup_config(data).ome_agent == {"image": "ome/ome-agent:v1.3.0"}
    message = failure_message(render_error(values=controller(extraConfig={"lifecycle": {}})))
    assert message == (
        "ome.controller.extraConfig.lifecycle: the chart writes the lifecycle entry; "
        "set it under ome.controller.lifecycle"
    )


# --- webhooks and the certificate ------------------------------------------------------------


WEBHOOKS = {
    "inferenceservice.ome-webhook-server.validator": (inferenceservice.PATH, "inferenceservices"),
    "inferencereplica.ome-webhook-server.validator": (inferencereplica.PATH, "inferencereplicas"),
    "inferenceservice.ome-webhook-server.defaulter": (defaulting.PATH, "inferenceservices"),
    "controllerrevision-immutability.ome-webhook-server.validator": (
        controllerrevision.PATH,
        "controllerrevisions",
    ),
}
RUNTIME_REVISION_HOOK = "controllerrevision-immutability.ome-webhook-server.validator"


def _webhooks(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in find(docs, kind)["webhooks"]:
            found[hook["name"]] = hook
    return found


def test_webhooks_route_to_the_paths_omed_serves(render: Render) -> None:
    docs = render(namespace="ome-system")
    hooks = _webhooks(docs)
    assert set(hooks) == set(WEBHOOKS)
    mutating = {h["name"] for h in find(docs, "MutatingWebhookConfiguration")["webhooks"]}
    assert mutating == {"inferenceservice.ome-webhook-server.defaulter"}
    for name, (path, resource) in WEBHOOKS.items():
        hook = hooks[name]
        assert hook["clientConfig"]["service"] == {
            "name": "ome-webhook-server-service",
            "namespace": "ome-system",
            "path": path,
            "port": 443,
        }
        runtime_revisions = name == RUNTIME_REVISION_HOOK
        assert hook["rules"] == [
            {
                "apiGroups": ["apps"] if runtime_revisions else ["ome.io"],
                "apiVersions": ["v1"] if runtime_revisions else ["v1beta1"],
                "operations": ["UPDATE"] if runtime_revisions else ["CREATE", "UPDATE"],
                "resources": [resource],
                "scope": "Namespaced",
            }
        ]
        if runtime_revisions:  # only omed's runtime revisions, never the cluster's others
            assert hook["objectSelector"] == {
                "matchExpressions": [{"key": "ome.io/runtime-of", "operator": "Exists"}]
            }
        else:
            assert "objectSelector" not in hook
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]


def test_self_signed_certificate(render: Render) -> None:
    docs = render(namespace="ome-system")
    assert not [d for d in docs if d["apiVersion"].startswith("cert-manager.io/")]
    secret = find(docs, "Secret", "ome-webhook-server-cert")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == "ome-system"
    ca_pem = base64.b64decode(secret["data"]["ca.crt"])
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(ca_pem)
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) >= {
        "ome-webhook-server-service.ome-system.svc",
        "ome-webhook-server-service.ome-system.svc.cluster.local",
    }
    for hook in _webhooks(docs).values():
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca_pem


def test_self_signed_keys_are_ecdsa_p256(render: Render) -> None:
    """ECDSA P-256, not RSA-2048: a cheaper handshake for the webhook server when the API
    server opens connections in a burst (docs/deploy.md)."""
    secret = find(render(), "Secret", "ome-webhook-server-cert")
    key = serialization.load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert isinstance(key.curve, ec.SECP256R1)
    leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    for certificate in (leaf, ca):
        public = certificate.public_key()
        assert isinstance(public, ec.EllipticCurvePublicKey)
        assert isinstance(public.curve, ec.SECP256R1)
        assert certificate.signature_algorithm_oid == x509.SignatureAlgorithmOID.ECDSA_WITH_SHA256
    # the key is the leaf certificate's, not the CA's
    assert key.public_key().public_numbers() == leaf.public_key().public_numbers()
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc >= timedelta(days=3649)


def test_self_signed_certificate_serves_tls_to_a_client_trusting_the_ca_bundle(
    render: Render, tmp_path: Path
) -> None:
    """The rendered Secret, as the manager loads it (its own SSLContext and load_cert_chain),
    completes a TLS handshake with a client that trusts only the webhooks' caBundle and checks
    the Service's name, as the API server does."""
    docs = render(namespace="ome-system")
    secret = find(docs, "Secret", "ome-webhook-server-cert")
    (crt, key) = (tmp_path / "tls.crt", tmp_path / "tls.key")
    crt.write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
    key.write_bytes(base64.b64decode(secret["data"]["tls.key"]))
    server_context = new_server_context()
    server_context.load_cert_chain(crt, key)
    (ca_bundle,) = {hook["clientConfig"]["caBundle"] for hook in _webhooks(docs).values()}
    client_context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())

    for name in (
        "ome-webhook-server-service.ome-system.svc",
        "ome-webhook-server-service.ome-system.svc.cluster.local",
    ):
        client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
        client = client_context.wrap_bio(client_in, client_out, server_hostname=name)
        server = server_context.wrap_bio(server_in, server_out, server_side=True)
        done = {"client": False, "server": False}
        for _ in range(10):  # a handshake is a few flights; each pass moves one
            for side, end in (("client", client), ("server", server)):
                if not done[side]:
                    try:
                        end.do_handshake()
                        done[side] = True
                    except ssl.SSLWantReadError:
                        pass
            server_in.write(client_out.read())
            client_in.write(server_out.read())
            if all(done.values()):
                break
        assert all(done.values()), name
        cipher = client.cipher()
        assert cipher is not None
        peer = x509.load_der_x509_certificate(client.getpeercert(binary_form=True) or b"")
        assert isinstance(peer.public_key(), ec.EllipticCurvePublicKey)


@pytest.mark.parametrize(
    ("api_versions", "sets"),
    [(["cert-manager.io/v1"], []), ([], ["ome.webhook.certificate=certManager"])],
    ids=["detected", "forced"],
)
def test_cert_manager_certificate(render: Render, api_versions: list[str], sets: list[str]) -> None:
    docs = render(namespace="ome-system", api_versions=api_versions, sets=sets)
    assert not [d for d in docs if d["kind"] == "Secret"]
    issuer = find(docs, "Issuer", "ome-selfsigned-issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    certificate = find(docs, "Certificate", "ome-serving-cert")
    assert certificate["spec"]["secretName"] == "ome-webhook-server-cert"
    # ECDSA P-256 rather than cert-manager's RSA-2048 default; a new key at every issuance,
    # so a Secret holding an older RSA key is re-issued rather than left waiting
    assert certificate["spec"]["privateKey"] == {
        "algorithm": "ECDSA",
        "size": 256,
        "rotationPolicy": "Always",
    }
    assert certificate["spec"]["issuerRef"] == {"kind": "Issuer", "name": "ome-selfsigned-issuer"}
    assert "ome-webhook-server-service.ome-system.svc" in certificate["spec"]["dnsNames"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        configuration = find(docs, kind)
        assert configuration["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "ome-system/ome-serving-cert"
        }
        for hook in configuration["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]


def test_self_signed_can_be_forced_when_cert_manager_is_present(render: Render) -> None:
    docs = render(api_versions=["cert-manager.io/v1"], sets=["ome.webhook.certificate=selfSigned"])
    assert find(docs, "Secret", "ome-webhook-server-cert")["type"] == "kubernetes.io/tls"
    assert not [d for d in docs if d["kind"] in ("Issuer", "Certificate")]


def test_bad_certificate_mode(render_error: RenderError) -> None:
    message = failure_message(render_error(sets=["ome.webhook.certificate=vault"]))
    assert message == 'ome.webhook.certificate must be auto, certManager or selfSigned, got "vault"'


# --- no registry host anywhere -----------------------------------------------------------------


def test_no_registry_host_in_the_charts_or_their_output(render: Render) -> None:
    files = [p for p in CHARTS.rglob("*") if p.is_file()]
    files += [ROOT / "Dockerfile", ROOT / "docs" / "deploy.md", ROOT / "docs" / "install.md"]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not REGISTRY_HOSTS.search(text), f"{path} names a registry host"
    for chart in (RESOURCES_CHART, CRD_CHART):
        for doc in render(chart=chart):
            assert not REGISTRY_HOSTS.search(json.dumps(doc)), doc["metadata"]["name"]
    image = manager(render())["image"]
    first = image.split("/", 1)[0]
    assert "." not in first and ":" not in first and first != "localhost", image


def test_every_chart_file_is_tracked_here() -> None:
    """docs/deploy.md describes these templates; a new one needs its section there."""
    root = RESOURCES_CHART / "templates"
    templates = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    docs = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for name in templates:
        assert f"`{name}`" in docs, f"docs/deploy.md doesn't describe templates/{name}"
