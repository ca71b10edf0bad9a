"""Values of the wrong shape fail ``helm template`` with a clear message, never a raw Go
template error (``nil pointer evaluating``, ``can't evaluate field``) and never a rendered
object the API server or the manager refuses later.

Every message has the form of the omenativeStatus messages: ``<value path> must be <what>,
got <the value as JSON>``. docs/deploy.md lists them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.config import parse_flags

from .charts import (
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

RAW_TEMPLATE_ERRORS = ("nil pointer", "can't evaluate field", "range can't iterate", "YAML parse")


def controller(**values: Any) -> dict[str, Any]:
    return {"ome": {"controller": values}}


def clear_failure(stderr: str) -> str:
    """The template's own message, after checking that helm printed no raw error."""
    for raw in RAW_TEMPLATE_ERRORS:
        assert raw not in stderr, stderr
    return failure_message(stderr)


# --- ome-resources: values from a values file -----------------------------------------------

BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("ome-null", {"ome": None}, "ome must be a map of the chart's values, got null"),
    (
        "controller-null",
        {"ome": {"controller": None}},
        "ome.controller must be a map of the manager's values, got null",
    ),
    (
        "controller-string",
        {"ome": {"controller": "x"}},
        'ome.controller must be a map of the manager\'s values, got "x"',
    ),
    (
        "omenative-status-string",
        controller(omenativeStatus="ColumnarV2"),
        "ome.controller.omenativeStatus must be a map of instanceStatusEncoding and "
        'maxDecodedInstances, got "ColumnarV2"',
    ),
    (
        "omenative-status-list",
        controller(omenativeStatus=["DenseV1"]),
        "ome.controller.omenativeStatus must be a map of instanceStatusEncoding and "
        'maxDecodedInstances, got ["DenseV1"]',
    ),
    (
        "replicas-null",
        controller(replicaCount=None),
        "ome.controller.replicaCount must be a whole number, 0 or more, got null",
    ),
    (
        "replicas-negative",
        controller(replicaCount=-1),
        "ome.controller.replicaCount must be a whole number, 0 or more, got -1",
    ),
    (
        "replicas-fraction",
        controller(replicaCount=2.5),
        "ome.controller.replicaCount must be a whole number, 0 or more, got 2.5",
    ),
    (
        "replicas-string",
        controller(replicaCount="3"),
        'ome.controller.replicaCount must be a whole number, 0 or more, got "3"',
    ),
    (
        "replicas-bool",
        controller(replicaCount=True),
        "ome.controller.replicaCount must be a whole number, 0 or more, got true",
    ),
    (
        "grace-negative",
        controller(terminationGracePeriodSeconds=-5),
        "ome.controller.terminationGracePeriodSeconds must be a whole number of seconds, "
        "0 or more, or null, got -5",
    ),
    (
        "ttl-unquoted-10",
        controller(configCacheTTL=10),
        'ome.controller.configCacheTTL must be a quoted duration such as "30s", got 10',
    ),
    (
        "ttl-bool",
        controller(configCacheTTL=True),
        'ome.controller.configCacheTTL must be a quoted duration such as "30s", got true',
    ),
    (
        "lease-unquoted",
        controller(leaderElection={"leaseDuration": 90}),
        "ome.controller.leaderElection.leaseDuration must be a quoted duration such as "
        '"60s", got 90',
    ),
    (
        "retry-unquoted",
        controller(leaderElection={"retryPeriod": 1.5}),
        'ome.controller.leaderElection.retryPeriod must be a quoted duration such as "8s", got 1.5',
    ),
    (
        "leader-election-string",
        controller(leaderElection="60s"),
        "ome.controller.leaderElection must be a map of leaseDuration, renewDeadline and "
        'retryPeriod, or null, got "60s"',
    ),
    (
        "qps-word",
        controller(kubeAPIQPS="fast"),
        'ome.controller.kubeAPIQPS must be a number, got "fast"',
    ),
    (
        "burst-list",
        controller(kubeAPIBurst=[400]),
        "ome.controller.kubeAPIBurst must be a number, got [400]",
    ),
    (
        "workers-bool",
        controller(inferenceServiceMaxConcurrentReconciles=True),
        "ome.controller.inferenceServiceMaxConcurrentReconciles must be a number, got true",
    ),
    (
        "accelerators-number",
        controller(acceleratorResources=5),
        "ome.controller.acceleratorResources must be a comma-separated string or a list of "
        "resource names, got 5",
    ),
    (
        "image-null",
        controller(image=None),
        "ome.controller.image must be a map of repository, tag and pullPolicy, got null",
    ),
    (
        "image-string",
        controller(image="ome/ome-manager:v1.3.0"),
        "ome.controller.image must be a map of repository, tag and pullPolicy, "
        'got "ome/ome-manager:v1.3.0"',
    ),
    (
        "repository-empty",
        controller(image={"repository": ""}),
        'ome.controller.image.repository must be a non-empty string such as "ome/ome-manager", '
        'got ""',
    ),
    (
        "event-recorder-number",
        controller(eventRecorder=400),
        "ome.controller.eventRecorder must be a map of the eventRecorder entry's fields, or "
        "null, got 400",
    ),
    (
        "lifecycle-string",
        controller(lifecycle="fast"),
        "ome.controller.lifecycle must be a map of the lifecycle entry's fields, or null, "
        'got "fast"',
    ),
    (
        "extra-config-list",
        controller(extraConfig=["omeAgent"]),
        "ome.controller.extraConfig must be a map of ConfigMap entry names to JSON objects, or "
        'null, got ["omeAgent"]',
    ),
    (
        "extra-config-entry-string",
        controller(extraConfig={"omeAgent": "on"}),
        'ome.controller.extraConfig.omeAgent must be a map, the entry\'s JSON object, got "on"',
    ),
    (
        "extra-env-map",
        controller(extraEnv={"HTTPS_PROXY": "http://proxy.example.com:3128"}),
        "ome.controller.extraEnv must be a list of environment variables, written like a "
        'container\'s env, or null, got {"HTTPS_PROXY":"http://proxy.example.com:3128"}',
    ),
    (
        "extra-env-item-string",
        controller(extraEnv=[{"name": "A", "value": "1"}, "B=2"]),
        "ome.controller.extraEnv[1] must be a map, an environment variable such as "
        '{name: HTTPS_PROXY, value: ...}, got "B=2"',
    ),
    (
        "extra-volumes-string",
        controller(extraVolumes="corp-ca"),
        "ome.controller.extraVolumes must be a list of volumes, written like a Pod's volumes, "
        'or null, got "corp-ca"',
    ),
    (
        "extra-mounts-map",
        controller(extraVolumeMounts={"name": "corp-ca", "mountPath": "/etc/corp-ca"}),
        "ome.controller.extraVolumeMounts must be a list of volume mounts, written like a "
        "container's volumeMounts, or null, got "
        '{"mountPath":"/etc/corp-ca","name":"corp-ca"}',
    ),
    (
        "pull-secrets-string",
        controller(imagePullSecrets="my-pull-secret"),
        "ome.controller.imagePullSecrets must be a list of Secret references, or null, "
        'got "my-pull-secret"',
    ),
    (
        "pull-secrets-item-string",
        controller(imagePullSecrets=["my-pull-secret"]),
        "ome.controller.imagePullSecrets[0] must be a map, a Secret reference such as "
        '{name: my-pull-secret}, got "my-pull-secret"',
    ),
    (
        "tolerations-map",
        controller(tolerations={"key": "gpu"}),
        "ome.controller.tolerations must be a list of the pod's tolerations, or null, "
        'got {"key":"gpu"}',
    ),
    (
        "resources-string",
        controller(resources="small"),
        "ome.controller.resources must be a map of the manager container's resources, or "
        'null, got "small"',
    ),
    (
        "pod-annotations-list",
        controller(podAnnotations=["a=b"]),
        'ome.controller.podAnnotations must be a map of annotations, or null, got ["a=b"]',
    ),
    (
        "priority-class-number",
        controller(priorityClassName=1000),
        "ome.controller.priorityClassName must be a string, got 1000",
    ),
    (
        "webhook-string",
        {"ome": {"webhook": "selfSigned"}},
        'ome.webhook must be a map of certificate and timeoutSeconds, or null, got "selfSigned"',
    ),
    (
        "webhook-timeout-0",
        {"ome": {"webhook": {"timeoutSeconds": 0}}},
        "ome.webhook.timeoutSeconds must be a whole number of seconds from 1 to 30, got 0",
    ),
    (
        "webhook-timeout-31",
        {"ome": {"webhook": {"timeoutSeconds": 31}}},
        "ome.webhook.timeoutSeconds must be a whole number of seconds from 1 to 30, got 31",
    ),
    (
        "webhook-timeout-string",
        {"ome": {"webhook": {"timeoutSeconds": "10s"}}},
        'ome.webhook.timeoutSeconds must be a whole number of seconds from 1 to 30, got "10s"',
    ),
    (
        "log-level-word",
        controller(logging={"level": "verbose"}),
        "ome.controller.logging.level must be debug, info, error, panic or a whole number "
        'above 0, got "verbose"',
    ),
    (
        "log-level-negative",
        controller(logging={"level": -1}),
        "ome.controller.logging.level must be debug, info, error, panic or a whole number "
        "above 0, got -1",
    ),
    (
        "log-level-fraction",
        controller(logging={"level": 2.5}),
        "ome.controller.logging.level must be debug, info, error, panic or a whole number "
        "above 0, got 2.5",
    ),
    (
        "log-level-list",
        controller(logging={"level": ["debug"]}),
        "ome.controller.logging.level must be debug, info, error, panic or a whole number "
        'above 0, got ["debug"]',
    ),
    (
        "log-encoder",
        controller(logging={"encoder": "text"}),
        'ome.controller.logging.encoder must be console or json, got "text"',
    ),
    (
        "policy-string",
        {"ome": {"rolloutPolicy": "on"}},
        'ome.rolloutPolicy must be a map of enabled, or null, got "on"',
    ),
    (
        "policy-enabled-string",
        {"ome": {"autoscalerPolicy": {"enabled": "false"}}},
        'ome.autoscalerPolicy.enabled must be true or false, got "false"',
    ),
]


@pytest.mark.parametrize(
    ("values", "message"),
    [(values, message) for _, values, message in BAD_VALUES],
    ids=[name for name, _, _ in BAD_VALUES],
)
def test_bad_values_fail_with_a_clear_message(
    render_error: RenderError, values: dict[str, Any], message: str
) -> None:
    assert clear_failure(render_error(values=values)) == message


# --- ome-resources: --set and --set-string -------------------------------------------------


@pytest.mark.parametrize(
    ("sets", "set_strings", "message"),
    [
        (
            ["ome.controller.omenativeStatus=ColumnarV2"],
            [],
            "ome.controller.omenativeStatus must be a map of instanceStatusEncoding and "
            'maxDecodedInstances, got "ColumnarV2"',
        ),
        (
            ["ome.controller=null"],
            [],
            "ome.controller must be a map of the manager's values, got null",
        ),
        (["ome=null"], [], "ome must be a map of the chart's values, got null"),
        (
            ["ome.controller.replicaCount=null"],
            [],
            "ome.controller.replicaCount must be a whole number, 0 or more, got null",
        ),
        (
            ["ome.controller.replicaCount=-2"],
            [],
            "ome.controller.replicaCount must be a whole number, 0 or more, got -2",
        ),
        (
            # --set reads 10 as an integer
            ["ome.controller.configCacheTTL=10"],
            [],
            'ome.controller.configCacheTTL must be a quoted duration such as "30s", got 10',
        ),
        (
            ["ome.controller.leaderElection.retryPeriod=8"],
            [],
            "ome.controller.leaderElection.retryPeriod must be a quoted duration such as "
            '"8s", got 8',
        ),
        (
            [],
            ["ome.controller.kubeAPIQPS=100/s"],
            'ome.controller.kubeAPIQPS must be a number, got "100/s"',
        ),
        (
            ["ome.controller.extraEnv=HTTPS_PROXY"],
            [],
            "ome.controller.extraEnv must be a list of environment variables, written like a "
            'container\'s env, or null, got "HTTPS_PROXY"',
        ),
        (
            ["ome.controller.image=null"],
            [],
            "ome.controller.image must be a map of repository, tag and pullPolicy, got null",
        ),
        (
            [],
            ["ome.rolloutPolicy.enabled=true"],
            'ome.rolloutPolicy.enabled must be true or false, got "true"',
        ),
    ],
    ids=[
        "omenative-status-string",
        "controller-null",
        "ome-null",
        "replicas-null",
        "replicas-negative",
        "ttl-unquoted-10",
        "retry-unquoted",
        "qps-word",
        "extra-env-string",
        "image-null",
        "policy-enabled-string",
    ],
)
def test_bad_set_flags_fail_with_a_clear_message(
    render_error: RenderError, sets: list[str], set_strings: list[str], message: str
) -> None:
    assert clear_failure(render_error(sets=sets, set_strings=set_strings)) == message


# --- what the checks let through ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("logging", "expected"),
    [
        ({"level": "debug"}, ["--zap-encoder=console", "--zap-log-level=debug"]),
        ({"level": "ERROR"}, ["--zap-encoder=console", "--zap-log-level=ERROR"]),
        ({"level": 2}, ["--zap-encoder=console", "--zap-log-level=2"]),
        ({"level": "3"}, ["--zap-encoder=console", "--zap-log-level=3"]),
        ({"level": None}, ["--zap-encoder=console"]),
        ({"level": 0}, ["--zap-encoder=console"]),
        ({"encoder": "json"}, ["--zap-encoder=json"]),
        (None, ["--zap-encoder=console"]),
    ],
    ids=["debug", "any-case", "number", "quoted-number", "null", "zero", "json", "null-block"],
)
def test_logging_values_become_flags_the_manager_reads(
    render: Render, logging: dict[str, Any] | None, expected: list[str]
) -> None:
    """``logging.encoder`` and ``logging.level`` set ``--zap-encoder`` and
    ``--zap-log-level``, and the manager's own flag parser accepts what renders."""
    deployment = find(render(controller(logging=logging)), "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--zap-")] == expected
    options = parse_flags(args, {})
    assert options.zap_encoder == expected[0].removeprefix("--zap-encoder=")
    if len(expected) == 2:
        assert str(options.zap_log_level) == expected[1].partition("=")[2].lower()
    else:
        assert options.zap_log_level == "info"


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (1, 1), (5.0, 5)])
def test_replica_count_whole_numbers(render: Render, value: float, expected: int) -> None:
    # 0 parks the manager (docs/deploy.md); a whole float from a values file is an integer
    deployment = find(render(controller(replicaCount=value)), "Deployment")
    assert deployment["spec"]["replicas"] == expected


def test_null_grace_period_is_left_to_kubernetes(render: Render) -> None:
    pod = find(render(controller(terminationGracePeriodSeconds=None)), "Deployment")
    assert "terminationGracePeriodSeconds" not in pod["spec"]["template"]["spec"]
    default = find(render(), "Deployment")["spec"]["template"]["spec"]
    assert default["terminationGracePeriodSeconds"] == 30


def test_null_webhook_block_takes_the_defaults(render: Render) -> None:
    docs = render({"ome": {"webhook": None}})
    assert find(docs, "Secret", "ome-webhook-server-cert")["type"] == "kubernetes.io/tls"
    configuration = find(docs, "ValidatingWebhookConfiguration")
    assert {hook["timeoutSeconds"] for hook in configuration["webhooks"]} == {10}


def test_null_policy_blocks_are_off(render: Render) -> None:
    docs = render({"ome": {"rolloutPolicy": None, "autoscalerPolicy": {"enabled": None}}})
    annotations = find(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["ome.io/policy-features"] == "rolloutPolicy=false,autoscalerPolicy=false"


@pytest.mark.parametrize(
    ("entry", "value"),
    [
        ("deploy", "deploy"),
        ("ingress", "ingress"),
        ("lifecycle", "lifecycle"),
        ("eventRecorder", "eventRecorder"),
        ("omenativeStatus", "omenativeStatus"),
        ("podDisruptionBudget", "componentPodDisruptionBudget"),
    ],
)
def test_extra_config_cant_replace_a_chart_entry(
    render_error: RenderError, entry: str, value: str
) -> None:
    # values.yaml and docs/deploy.md say so: the chart's own entries are set under their value
    message = clear_failure(render_error(values=controller(extraConfig={entry: {"x": 1}})))
    assert message == (
        f"ome.controller.extraConfig.{entry}: the chart writes the {entry} entry; "
        f"set it under ome.controller.{value}"
    )


# --- ome-crd ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ome": None}, "ome must be a map of the chart's values, got null"),
        (
            {"ome": {"rolloutPolicy": True}},
            "ome.rolloutPolicy must be a map of enabled, or null, got true",
        ),
        (
            {"ome": {"rolloutPolicy": {"enabled": "false"}}},
            'ome.rolloutPolicy.enabled must be true or false, got "false"',
        ),
        (
            {"ome": {"autoscalerPolicy": {"enabled": 1}}},
            "ome.autoscalerPolicy.enabled must be true or false, got 1",
        ),
        ({"ome": {"crds": "keep"}}, 'ome.crds must be a map of keep, or null, got "keep"'),
        ({"ome": {"crds": {"keep": "no"}}}, 'ome.crds.keep must be true or false, got "no"'),
    ],
    ids=[
        "ome-null",
        "policy-bool",
        "enabled-string",
        "enabled-number",
        "crds-string",
        "keep-string",
    ],
)
def test_crd_chart_bad_values(
    render_error: RenderError, values: dict[str, Any], message: str
) -> None:
    assert clear_failure(render_error(values=values, chart=CRD_CHART)) == message


@pytest.mark.parametrize(
    "values",
    [{"ome": {"crds": None}}, {"ome": {"crds": {"keep": None}}}],
    ids=["crds-null", "keep-null"],
)
def test_crd_chart_null_keep_still_keeps(render: Render, values: dict[str, Any]) -> None:
    """Only an explicit false lets `helm uninstall ome-crd` delete the CRDs, and with them every
    InferenceService: a null can't do it by accident."""
    crds = [d for d in render(values, chart=CRD_CHART) if d["kind"] == "CustomResourceDefinition"]
    assert crds
    for crd in crds:
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_crd_chart_null_policies_are_off(render: Render) -> None:
    docs = render(
        {"ome": {"rolloutPolicy": None, "autoscalerPolicy": {"enabled": None}}}, chart=CRD_CHART
    )
    names = {d["metadata"]["name"] for d in docs}
    assert not names & {"rolloutpolicies.ome.io", "autoscalerpolicies.ome.io"}


# --- values.schema.json: unknown keys and the types the templates don't check ----------------

SCHEMA_ERROR = "values don't meet the specifications of the schema(s) in the following chart(s):"


def schema_failures(stderr: str) -> list[str]:
    """helm's schema errors, one ``at '<JSON pointer>': <what>`` a line; the test fails when
    helm failed otherwise."""
    assert SCHEMA_ERROR in stderr, stderr
    return [line[2:] for line in stderr.splitlines() if line.startswith("- at '")]


MISSPELT: list[tuple[str, dict[str, Any], str]] = [
    (
        "controller",
        {"ome": {"controler": {"replicaCount": 2}}},
        "at '/ome': additional properties 'controler' not allowed",
    ),
    (
        "top-level",
        {"controller": {"replicaCount": 2}},
        "at '': additional properties 'controller' not allowed",
    ),
    (
        "replica-count",
        controller(replicaCout=2),
        "at '/ome/controller': additional properties 'replicaCout' not allowed",
    ),
    (
        "lease-duration",
        controller(leaderElection={"leaseDuraton": "90s"}),
        "at '/ome/controller/leaderElection': additional properties 'leaseDuraton' not allowed",
    ),
    (
        "max-decoded-instances",
        controller(omenativeStatus={"maxDecodedInstance": 5000}),
        "at '/ome/controller/omenativeStatus': additional properties 'maxDecodedInstance' "
        "not allowed",
    ),
    (
        "audit-window",
        controller(lifecycle={"audit": {"windw": "2h"}}),
        "at '/ome/controller/lifecycle/audit': additional properties 'windw' not allowed",
    ),
    (
        "ingress-field",
        controller(ingress={"urlSchema": "https"}),
        "at '/ome/controller/ingress': additional properties 'urlSchema' not allowed",
    ),
    (
        "image-field",
        controller(image={"pullPolcy": "Always"}),
        "at '/ome/controller/image': additional properties 'pullPolcy' not allowed",
    ),
    (
        "pdb-field",
        controller(podDisruptionBudget={"maxUnavailble": 1}),
        "at '/ome/controller/podDisruptionBudget': additional properties 'maxUnavailble' "
        "not allowed",
    ),
    (
        "webhook-field",
        {"ome": {"webhook": {"timeoutSecond": 5}}},
        "at '/ome/webhook': additional properties 'timeoutSecond' not allowed",
    ),
    (
        "policy-field",
        {"ome": {"rolloutPolicy": {"enable": True}}},
        "at '/ome/rolloutPolicy': additional properties 'enable' not allowed",
    ),
]


@pytest.mark.parametrize(
    ("values", "failure"),
    [(values, failure) for _, values, failure in MISSPELT],
    ids=[name for name, _, _ in MISSPELT],
)
def test_a_misspelt_key_fails_with_the_schema_error_naming_it(
    render_error: RenderError, values: dict[str, Any], failure: str
) -> None:
    assert schema_failures(render_error(values=values)) == [failure]


def test_a_misspelt_set_flag_fails_naming_the_key(render_error: RenderError) -> None:
    stderr = render_error(sets=["ome.controler.replicaCount=2"])
    assert schema_failures(stderr) == ["at '/ome': additional properties 'controler' not allowed"]
    assert "ome-resources:" in stderr


@pytest.mark.parametrize(
    ("values", "failure"),
    [
        (
            {"ome": {"crds": {"kep": False}}},
            "at '/ome/crds': additional properties 'kep' not allowed",
        ),
        (
            {"ome": {"autoscalerPolicy": {"enabeld": True}}},
            "at '/ome/autoscalerPolicy': additional properties 'enabeld' not allowed",
        ),
        ({"ome": {"crd": {"keep": False}}}, "at '/ome': additional properties 'crd' not allowed"),
    ],
    ids=["keep", "enabled", "crds"],
)
def test_crd_chart_misspelt_key(
    render_error: RenderError, values: dict[str, Any], failure: str
) -> None:
    assert schema_failures(render_error(values=values, chart=CRD_CHART)) == [failure]


@pytest.mark.parametrize(
    ("values", "failure"),
    [
        (
            controller(image={"pullPolicy": "Sometimes"}),
            "at '/ome/controller/image/pullPolicy': value must be one of 'Always', "
            "'IfNotPresent', 'Never', '', <nil>",
        ),
        (
            controller(image={"tag": ["v1"]}),
            "at '/ome/controller/image/tag': got array, want null or number or string",
        ),
        (
            controller(podDisruptionBudget={"enabled": "yes"}),
            "at '/ome/controller/podDisruptionBudget/enabled': got string, want boolean",
        ),
        (
            controller(podDisruptionBudget={"maxUnavailable": -1}),
            "at '/ome/controller/podDisruptionBudget/maxUnavailable': minimum: got -1, want 0",
        ),
        (
            controller(podDisruptionBudget={"maxUnavailable": "150%"}),
            "at '/ome/controller/podDisruptionBudget/maxUnavailable': '150%' does not match "
            "pattern '^(100|[1-9]?[0-9])%$'",
        ),
        (
            controller(podDisruptionBudget={"maxUnavailable": "1"}),
            "at '/ome/controller/podDisruptionBudget/maxUnavailable': '1' does not match "
            "pattern '^(100|[1-9]?[0-9])%$'",
        ),
        (
            controller(podDisruptionBudget={"unhealthyPodEvictionPolicy": "Never"}),
            "at '/ome/controller/podDisruptionBudget/unhealthyPodEvictionPolicy': value must be "
            "one of 'IfHealthyBudget', 'AlwaysAllow', <nil>",
        ),
    ],
    ids=[
        "pull-policy",
        "tag-list",
        "pdb-enabled",
        "pdb-negative",
        "pdb-percent",
        "pdb-quoted",
        "pdb-policy",
    ],
)
def test_schema_checks_what_the_templates_dont(
    render_error: RenderError, values: dict[str, Any], failure: str
) -> None:
    assert schema_failures(render_error(values=values)) == [failure]


def test_the_templates_messages_come_before_the_schemas() -> None:
    """Every message BAD_VALUES pins is the template's, not the schema's: the schema says no
    type for a value a template checks (test_bad_values_fail_with_a_clear_message runs them
    all with the schema in place). Here: no such value has a type in the schema."""
    schema = json.loads((RESOURCES_CHART / "values.schema.json").read_text(encoding="utf-8"))
    ome = schema["properties"]["ome"]["properties"]
    controller_schema = ome["controller"]["properties"]
    checked = [
        controller_schema[key]
        for key in (
            "replicaCount",
            "terminationGracePeriodSeconds",
            "priorityClassName",
            "configCacheTTL",
            "kubeAPIQPS",
            "kubeAPIBurst",
            "acceleratorResources",
            "inferenceServiceMaxConcurrentReconciles",
            "inferenceReplicaMaxConcurrentReconciles",
            "extraEnv",
            "extraConfig",
            "resources",
            "image",
            "omenativeStatus",
            "leaderElection",
        )
    ]
    checked += [
        controller_schema["omenativeStatus"]["properties"][key]
        for key in ("instanceStatusEncoding", "maxDecodedInstances")
    ]
    checked += [ome["webhook"], *ome["webhook"]["properties"].values(), ome["rolloutPolicy"]]
    for entry in checked:
        assert "type" not in entry and "enum" not in entry, entry


@pytest.mark.parametrize(
    "values",
    [
        # free-form maps and lists stay open: Kubernetes checks them
        controller(
            resources={"requests": {"cpu": "1", "example.com/dongle": "1"}},
            podLabels={"team": "ml", "cost-center": "42"},
            podAnnotations={"example.com/anything": "goes"},
            nodeSelector={"node-role.kubernetes.io/control-plane": ""},
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "pool", "operator": "In", "values": ["ctl"]}
                                ]
                            }
                        ]
                    }
                }
            },
            tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            extraEnv=[{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
            extraConfig={"omeAgent": {"image": "agent:1", "anything": {"nested": True}}},
        ),
        # the ome-crd chart's values, as one values file for both charts gives them
        {"ome": {"crds": {"keep": False}, "rolloutPolicy": {"enabled": True}}},
    ],
    ids=["open-maps", "crd-chart-values"],
)
def test_open_values_and_the_other_charts_values_render(
    render: Render, values: dict[str, Any]
) -> None:
    assert find(render(values), "Deployment")


def test_the_resources_charts_values_render_the_crd_chart(render: Render) -> None:
    """One values file for both charts: ome-crd accepts ome.controller and ome.webhook (and
    doesn't read them)."""
    values = yaml.safe_load((RESOURCES_CHART / "values.yaml").read_text(encoding="utf-8"))
    crds = [d for d in render(values, chart=CRD_CHART) if d["kind"] == "CustomResourceDefinition"]
    assert crds


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            controller(podDisruptionBudget={"minAvailable": 2}),
            "ome.controller.podDisruptionBudget must set one of minAvailable and "
            "maxUnavailable, and the other to null, got "
            '{"enabled":true,"maxUnavailable":1,"minAvailable":2,'
            '"unhealthyPodEvictionPolicy":"AlwaysAllow"}',
        ),
        (
            controller(podDisruptionBudget={"maxUnavailable": None}),
            "ome.controller.podDisruptionBudget must set minAvailable or maxUnavailable when "
            'enabled, got {"enabled":true,"minAvailable":null,'
            '"unhealthyPodEvictionPolicy":"AlwaysAllow"}',
        ),
    ],
    ids=["both", "neither"],
)
def test_pdb_bounds(render_error: RenderError, values: dict[str, Any], message: str) -> None:
    assert clear_failure(render_error(values=values)) == message


EXAMPLE_VALUES = ROOT / "examples" / "ome-values.yaml"


@pytest.mark.parametrize("chart", [CRD_CHART, RESOURCES_CHART], ids=["ome-crd", "ome-resources"])
@pytest.mark.parametrize("values_file", [None, EXAMPLE_VALUES], ids=["defaults", "example"])
def test_the_schema_accepts_the_defaults_and_the_example(
    helm: str, kube_version: str, chart: Path, values_file: Path | None
) -> None:
    """The chart's own defaults and examples/ome-values.yaml (what ./dev demo installs) pass
    both charts' schemas: ``helm lint --strict`` and ``helm template`` succeed with them."""
    extra = [] if values_file is None else ["--values", str(values_file)]
    lint = run_helm(helm, ["lint", "--strict", str(chart), *extra])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rendered = run_helm(
        helm, ["template", "ome", str(chart), "--kube-version", kube_version, *extra]
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "kind:" in rendered.stdout


def test_one_values_file_serves_both_charts_with_its_monitoring_block(render: Render) -> None:
    """The ome-resources chart reads ``monitoring``; the ome-crd chart accepts it unread, so
    one values file installs both."""
    values = {"monitoring": {"job": "ome", "serviceMonitor": {"enabled": False}}}
    assert find(render(values), "Deployment")
    assert find(
        render(values, chart=CRD_CHART), "CustomResourceDefinition", "inferenceservices.ome.io"
    )
