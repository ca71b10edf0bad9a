"""Reconcile-time entries: deploy, ingress (without enableGatewayAPI), lifecycle."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omed.config.entries import (
    ReconcileConfig,
    ReconcileConfigError,
    deploy_entry,
    reconcile_entries,
)

AUDIT = {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10, "window": "1h"}


def entries(**values: Any) -> ReconcileConfig:
    return reconcile_entries(
        {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in values.items()
        }
    )


def refused(**values: Any) -> ReconcileConfigError:  # deploy and ingress only
    with pytest.raises(ReconcileConfigError) as caught:
        entries(**values)
    return caught.value


def test_empty_configmap() -> None:
    config = reconcile_entries({})
    assert config.deploy.default_deployment_mode is None
    assert config.deploy.replicas is None
    assert config.ingress.ingress_domain is None
    assert config.lifecycle.instance_ready_timeout is None
    assert config.lifecycle.requeue.operation is None
    assert config.lifecycle.audit is None
    assert (
        config.lifecycle.audit_problem == "ConfigMap inferenceservice-config has no lifecycle entry"
    )


# --- deploy ----------------------------------------------------------------------------------


def test_deploy() -> None:
    config = entries(
        deploy={
            "defaultDeploymentMode": "OMENative",
            "replicas": {"minReplicas": 1, "maxReplicas": 3},
            "futureSetting": True,
        }
    )
    assert config.deploy.default_deployment_mode == "OMENative"
    assert config.deploy.replicas is not None
    assert config.deploy.replicas.min_replicas == 1
    assert config.deploy.replicas.max_replicas == 3


def test_the_deploy_readers_never_fail_on_the_other_entries() -> None:
    # The InferenceService controller and the defaulting webhook read deploy alone: a bad
    # lifecycle or ingress field (which they don't use) must not fail them.
    data = {
        "deploy": json.dumps({"defaultDeploymentMode": "OMENative"}),
        "lifecycle": json.dumps({"instanceReadyTimeout": "x"}),
        "ingress": json.dumps({"ingressDomain": 5}),
    }
    with pytest.raises(ReconcileConfigError):
        reconcile_entries(data)
    assert deploy_entry(data).default_deployment_mode == "OMENative"
    assert deploy_entry({}).default_deployment_mode is None
    with pytest.raises(ReconcileConfigError, match="deploy"):
        deploy_entry({"deploy": "{"})


def test_deploy_replicas_may_set_one_side() -> None:
    replicas = entries(deploy={"replicas": {"minReplicas": 0}}).deploy.replicas
    assert replicas is not None
    assert (replicas.min_replicas, replicas.max_replicas) == (0, None)


@pytest.mark.parametrize(
    ("deploy", "error"),
    [
        (
            "{",
            "parse deploy: invalid JSON: unexpected end of data: line 1 column 2 (char 1)",
        ),
        ('"RawDeployment"', "parse deploy: want a JSON object, got string"),
        (
            {"defaultDeploymentMode": 5},
            "validate deploy.defaultDeploymentMode: invalid deploy.defaultDeploymentMode 5 "
            "must be a non-empty string",
        ),
        (
            {"defaultDeploymentMode": ""},
            'validate deploy.defaultDeploymentMode: invalid deploy.defaultDeploymentMode "" '
            "must be a non-empty string",
        ),
        (
            {"replicas": 3},
            "validate deploy.replicas: invalid deploy.replicas 3 must be a JSON object",
        ),
        (
            {"replicas": {"minReplicas": -1}},
            "validate deploy.replicas.minReplicas: invalid deploy.replicas.minReplicas -1 must "
            "be an integer >= 0",
        ),
        (
            {"replicas": {"maxReplicas": 0}},
            "validate deploy.replicas.maxReplicas: invalid deploy.replicas.maxReplicas 0 must "
            "be an integer >= 1",
        ),
        (
            {"replicas": {"minReplicas": 3, "maxReplicas": 2}},
            "validate deploy.replicas.maxReplicas: invalid deploy.replicas.maxReplicas 2 must "
            "be at least deploy.replicas.minReplicas 3",
        ),
    ],
)
def test_deploy_refused(deploy: object, error: str) -> None:
    caught = refused(deploy=deploy)
    assert caught.key == "deploy"
    assert caught.error == error
    assert str(caught) == f"invalid deploy entry in ConfigMap inferenceservice-config: {error}"


# --- ingress ---------------------------------------------------------------------------------


def test_ingress() -> None:
    ingress = entries(
        ingress={
            "ingressGateway": "ome/gateway",
            "ingressService": "gateway.ome.svc",
            "ingressDomain": "example.com",
            "ingressClassName": "nginx",
            "additionalIngressDomains": ["a.example.com"],
            "domainTemplate": "{{ .Name }}.{{ .Namespace }}.{{ .IngressDomain }}",
            "urlScheme": "https",
            "pathTemplate": "/serving/{{ .Namespace }}/{{ .Name }}",
            "disableIstioVirtualHost": True,
            "disableIngressCreation": True,
            "enableGatewayAPI": True,
        }
    ).ingress
    assert ingress.ingress_gateway == "ome/gateway"
    assert ingress.ingress_service == "gateway.ome.svc"
    assert ingress.ingress_domain == "example.com"
    assert ingress.ingress_class_name == "nginx"
    assert ingress.additional_ingress_domains == ("a.example.com",)
    assert ingress.url_scheme == "https"
    assert ingress.path_template == "/serving/{{ .Namespace }}/{{ .Name }}"
    assert ingress.disable_istio_virtual_host is True
    assert ingress.disable_ingress_creation is True


def test_ingress_ignores_the_startup_setting() -> None:
    # A kubectl edit to enableGatewayAPI applies at the next restart; it can't break reconciles.
    assert entries(ingress={"enableGatewayAPI": "yes"}).ingress.disable_ingress_creation is False


@pytest.mark.parametrize(
    ("ingress", "error"),
    [
        (
            {"ingressDomain": 5},
            "validate ingress.ingressDomain: invalid ingress.ingressDomain 5 must be a string",
        ),
        (
            {"additionalIngressDomains": "a.example.com"},
            "validate ingress.additionalIngressDomains: invalid ingress.additionalIngressDomains "
            '"a.example.com" must be an array of strings',
        ),
        (
            {"disableIngressCreation": "true"},
            "validate ingress.disableIngressCreation: invalid ingress.disableIngressCreation "
            '"true" must be true or false',
        ),
    ],
)
def test_ingress_refused(ingress: object, error: str) -> None:
    caught = refused(ingress=ingress)
    assert caught.key == "ingress"
    assert caught.error == error


# --- lifecycle -------------------------------------------------------------------------------


def test_lifecycle_chart_values() -> None:
    lifecycle = entries(
        lifecycle={
            "instanceReadyTimeout": "30m",
            "audit": AUDIT,
            "requeue": {"operation": "5s", "gate": "3s"},
        }
    ).lifecycle
    assert lifecycle.instance_ready_timeout == 1800.0
    assert lifecycle.requeue.operation == 5.0
    assert lifecycle.requeue.gate == 3.0
    assert lifecycle.audit is not None
    assert lifecycle.audit.max_in_flight_migrations == 3
    assert lifecycle.audit.max_migrations_per_window == 10
    assert lifecycle.audit.window == 3600.0
    assert lifecycle.audit_problem is None


def test_lifecycle_startup_fields_are_not_read_at_reconcile_time() -> None:
    lifecycle = entries(
        lifecycle={"scaleUpPodBatchSize": "garbage", "scaleDownRequeueInterval": 0, "audit": AUDIT}
    ).lifecycle
    assert lifecycle.audit is not None


def test_missing_audit_holds_migrations() -> None:
    lifecycle = entries(lifecycle={"instanceReadyTimeout": "10m"}).lifecycle
    assert lifecycle.audit is None
    assert lifecycle.audit_problem == "lifecycle.audit is not set"
    lifecycle = entries(lifecycle={"audit": None}).lifecycle
    assert lifecycle.audit_problem == "lifecycle.audit is not set"


@pytest.mark.parametrize(
    ("audit", "problem"),
    [
        (5, "validate lifecycle.audit: invalid lifecycle.audit 5 must be a JSON object"),
        (
            {"maxInFlightMigrations": 3, "maxMigrationsPerWindow": 10},
            "validate lifecycle.audit.window: lifecycle.audit.window is required",
        ),
        (
            {**AUDIT, "maxInFlightMigrations": 0},
            "validate lifecycle.audit.maxInFlightMigrations: invalid "
            "lifecycle.audit.maxInFlightMigrations 0 must be a positive integer",
        ),
        (
            {**AUDIT, "maxMigrationsPerWindow": -1},
            "validate lifecycle.audit.maxMigrationsPerWindow: invalid "
            "lifecycle.audit.maxMigrationsPerWindow -1 must be a positive integer",
        ),
        (
            {**AUDIT, "window": "0s"},
            'validate lifecycle.audit.window: invalid lifecycle.audit.window "0s" must be a '
            'positive duration, such as "1h"',
        ),
        (
            {**AUDIT, "maxInFlightMigrations": None},
            "validate lifecycle.audit.maxInFlightMigrations: invalid "
            "lifecycle.audit.maxInFlightMigrations null must be a positive integer",
        ),
        (
            {**AUDIT, "maxMigrationsPerWindow": True},
            "validate lifecycle.audit.maxMigrationsPerWindow: invalid "
            "lifecycle.audit.maxMigrationsPerWindow true must be a positive integer",
        ),
        (
            {**AUDIT, "window": None},
            "validate lifecycle.audit.window: invalid lifecycle.audit.window null must be a "
            'duration string, such as "1h"',
        ),
    ],
)
def test_invalid_audit_holds_migrations_without_failing(audit: object, problem: str) -> None:
    lifecycle = entries(lifecycle={"audit": audit, "instanceReadyTimeout": "10m"}).lifecycle
    assert lifecycle.audit is None
    assert lifecycle.audit_problem == problem
    assert lifecycle.instance_ready_timeout == 600.0


@pytest.mark.parametrize(
    ("lifecycle", "error"),
    [
        ("[]", "parse lifecycle: want a JSON object, got array"),
        (
            {"instanceReadyTimeout": "0s"},
            "validate lifecycle.instanceReadyTimeout: invalid lifecycle.instanceReadyTimeout "
            '"0s" must be a positive duration, such as "30m"',
        ),
        (
            {"requeue": "5s"},
            'validate lifecycle.requeue: invalid lifecycle.requeue "5s" must be a JSON object',
        ),
        (
            {"requeue": {"operation": 5, "gate": "x"}},
            "validate lifecycle.requeue.operation: invalid lifecycle.requeue.operation 5 must be "
            'a duration string, such as "5s"; validate lifecycle.requeue.gate: invalid '
            'lifecycle.requeue.gate "x" must be a positive duration, such as "3s": '
            'time: invalid duration "x"',
        ),
    ],
)
def test_an_invalid_lifecycle_key_is_unconfigured_and_reported(
    lifecycle: object, error: str
) -> None:
    # Upstream's rule: an invalid key is unconfigured and the manager (and every other key)
    # keeps working; the message names the key, its value and the rule.
    config = entries(lifecycle=lifecycle).lifecycle
    assert config.problems == (error,)
    assert config.instance_ready_timeout is None
    assert (config.requeue.operation, config.requeue.gate) == (None, None)


def test_parsing_is_shared_between_reads_of_the_same_data() -> None:
    data = {"deploy": '{"defaultDeploymentMode": "OMENative"}', "lifecycle": "{}"}
    first = reconcile_entries(data)
    second = reconcile_entries(dict(data))
    assert first is second
    edited = reconcile_entries({**data, "deploy": '{"defaultDeploymentMode": "RawDeployment"}'})
    assert edited.deploy.default_deployment_mode == "RawDeployment"


def test_a_bad_entry_keeps_failing_until_fixed() -> None:
    data = {"deploy": "{"}
    for _ in range(2):
        with pytest.raises(ReconcileConfigError):
            reconcile_entries(data)
    assert reconcile_entries({"deploy": "{}"}).deploy.default_deployment_mode is None
