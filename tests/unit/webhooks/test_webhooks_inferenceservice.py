"""The InferenceService validator: every rule, with its exact message or warning."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_world import REQUEST_KEY, Request

from omed.webhooks.components import (
    MAX_REPLICAS_ZERO,
    MULTI_POD_READY_POLICY_NONE,
    WARN_MIN_REPLICAS_ZERO,
    WARN_NO_READY_TIMEOUT,
    WARN_READY_POLICY_NONE,
    WARN_ZERO_BUDGETS,
)
from omed.webhooks.findings import RATCHET_NOTE
from omed.webhooks.inferenceservice import InferenceServiceValidator, max_name_length
from omed.webhooks.review import AdmissionResponse

VALIDATOR = InferenceServiceValidator()


def review(request_for: Request, obj: dict[str, Any], **kwargs: Any) -> AdmissionResponse:
    return VALIDATOR.review(request_for(obj, **kwargs))


def refused(request_for: Request, obj: dict[str, Any], **kwargs: Any) -> list[str]:
    answer = review(request_for, obj, **kwargs)
    assert not answer.allowed, answer
    assert answer.code == 403
    return answer.message.split("; ")


def test_valid_service_is_admitted_without_warnings(request_for: Request, isvc: dict) -> None:
    answer = review(request_for, isvc)
    assert answer.allowed and answer.warnings == () and answer.patch is None


# -- Replica bounds ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        ({"minReplicas": -1}, "spec.engine.minReplicas: must be >= 0, got -1"),
        ({"minReplicas": "3"}, 'spec.engine.minReplicas: must be an integer, got "3"'),
        ({"minReplicas": True}, "spec.engine.minReplicas: must be an integer, got true"),
        ({"maxReplicas": -2}, "spec.engine.maxReplicas: must be >= 1, got -2"),
        ({"maxReplicas": 0}, f"spec.engine.maxReplicas: {MAX_REPLICAS_ZERO}"),
        (
            {"minReplicas": 5, "maxReplicas": 3},
            "spec.engine.minReplicas: must be <= maxReplicas (3), got 5",
        ),
        ({"worker": {"size": -1}}, "spec.engine.worker.size: must be >= 0, got -1"),
    ],
)
def test_replica_bounds(
    request_for: Request, isvc: dict, engine: dict[str, Any], message: str
) -> None:
    isvc["spec"]["engine"] = engine
    assert refused(request_for, isvc) == [message]


def test_min_equal_to_max_and_open_max_are_admitted(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"] = {"minReplicas": 2, "maxReplicas": 2}
    isvc["spec"]["router"] = {"minReplicas": 3}
    assert review(request_for, isvc).allowed


def test_min_replicas_zero_warns(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["router"]["minReplicas"] = 0
    answer = review(request_for, isvc)
    assert answer.allowed
    assert answer.warnings == (f"spec.router.minReplicas: {WARN_MIN_REPLICAS_ZERO}",)


def test_component_must_be_an_object(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"] = "big"
    assert refused(request_for, isvc) == ['spec.engine: must be an object, got "big"']


def test_spec_must_be_an_object(request_for: Request, isvc: dict) -> None:
    del isvc["spec"]
    assert refused(request_for, isvc) == ["spec: must be an object, got null"]


# -- Lifecycle -----------------------------------------------------------------------------

LC = "spec.engine.lifecycle"


@pytest.mark.parametrize(
    ("lifecycle", "message"),
    [
        (
            {"restartPolicy": "Always"},
            f'{LC}.restartPolicy: must be one of None, RecreateInstanceOnPodRestart, got "Always"',
        ),
        (
            {"updateStrategy": {"type": "Rolling"}},
            f"{LC}.updateStrategy.type: must be one of SurgeThenDrain, RecreatePod, "
            'InPlaceIfPossible, InPlaceOnly, got "Rolling"',
        ),
        (
            {"updateStrategy": {"rollingUpdate": {"maxSurge": "150%"}}},
            f"{LC}.updateStrategy.rollingUpdate.maxSurge: must be an integer >= 0 or a "
            'percentage from "0%" to "100%", got "150%"',
        ),
        (
            {"updateStrategy": {"rollingUpdate": {"maxUnavailable": -1}}},
            f"{LC}.updateStrategy.rollingUpdate.maxUnavailable: must be an integer >= 0 or a "
            'percentage from "0%" to "100%", got -1',
        ),
        (
            {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "1.5%"}}},
            f"{LC}.updateStrategy.rollingUpdate.maxUnavailable: must be an integer >= 0 or a "
            'percentage from "0%" to "100%", got "1.5%"',
        ),
        (
            {"updateStrategy": {"rollingUpdate": {"partition": -3}}},
            f"{LC}.updateStrategy.rollingUpdate.partition: must be >= 0, got -3",
        ),
        (
            {"readyPolicy": "Some"},
            f'{LC}.readyPolicy: must be one of AllPodReady, None, got "Some"',
        ),
        (
            {"migrationPolicy": {"mode": "Always"}},
            f'{LC}.migrationPolicy.mode: must be one of Auto, Surge, Never, got "Always"',
        ),
        (
            {"instanceReadyTimeout": "15 minutes"},
            f'{LC}.instanceReadyTimeout: must be a duration such as "15m", got "15 minutes"',
        ),
        (
            {"instanceReadyTimeout": "0s"},
            f'{LC}.instanceReadyTimeout: must be a positive duration such as "15m" '
            '(or left out), got "0s"',
        ),
        ({"minReadySeconds": -5}, f"{LC}.minReadySeconds: must be >= 0, got -5"),
        ({"updateRetry": {"maxAttempts": 0}}, f"{LC}.updateRetry.maxAttempts: must be >= 1, got 0"),
        (
            {"updateRetry": {"initialDelay": "5m", "maxDelay": "1m"}},
            f"{LC}.updateRetry.initialDelay: must not be longer than maxDelay (1m), got 5m",
        ),
        (
            {"updateRetry": {"multiplier": 0.5}},
            f"{LC}.updateRetry.multiplier: must be a number >= 1, got 0.5",
        ),
        (
            {"repairBatchSize": "0%"},
            f'{LC}.repairBatchSize: must be an integer >= 1 or a percentage from "1%" to '
            '"100%", got "0%"',
        ),
        ({"updateStrategy": []}, f"{LC}.updateStrategy: must be an object, got []"),
        ("fast", f'{LC}: must be an object, got "fast"'),
    ],
)
def test_lifecycle_values(request_for: Request, isvc: dict, lifecycle: Any, message: str) -> None:
    isvc["spec"]["engine"]["lifecycle"] = lifecycle
    assert refused(request_for, isvc) == [message]


def test_full_lifecycle_is_admitted(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["lifecycle"] = {
        "restartPolicy": "RecreateInstanceOnPodRestart",
        "updateStrategy": {
            "type": "InPlaceIfPossible",
            "rollingUpdate": {"partition": 1, "maxSurge": "25%", "maxUnavailable": 1},
        },
        "readyPolicy": "AllPodReady",
        "instanceReadyTimeout": "15m",
        "minReadySeconds": 10,
        "migrationPolicy": {"mode": "Surge"},
        "updateRetry": {
            "maxAttempts": 5,
            "initialDelay": "30s",
            "maxDelay": "10m",
            "multiplier": 2,
        },
        "repairBatchSize": "10%",
    }
    answer = review(request_for, isvc)
    assert answer.allowed and answer.warnings == ()


def test_ready_policy_none_refused_for_multi_pod(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["worker"] = {"size": 2}
    isvc["spec"]["engine"]["lifecycle"] = {"readyPolicy": "None"}
    assert refused(request_for, isvc) == [
        f"spec.engine.lifecycle.readyPolicy: {MULTI_POD_READY_POLICY_NONE}"
    ]
    del isvc["spec"]["engine"]["worker"]
    isvc["spec"]["engine"]["leader"] = {}
    assert len(refused(request_for, isvc)) == 1


def test_ready_policy_none_warns_for_single_pod(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["lifecycle"] = {"readyPolicy": "None"}
    answer = review(request_for, isvc)
    assert answer.allowed
    assert answer.warnings == (f"spec.engine.lifecycle.readyPolicy: {WARN_READY_POLICY_NONE}",)


@pytest.mark.parametrize(("surge", "unavailable"), [(0, 0), ("0%", 0), (0, "0%")])
def test_zero_budgets_warn(request_for: Request, isvc: dict, surge: Any, unavailable: Any) -> None:
    isvc["spec"]["engine"]["lifecycle"] = {
        "updateStrategy": {"rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}
    }
    answer = review(request_for, isvc)
    assert answer.allowed
    assert answer.warnings == (
        f"spec.engine.lifecycle.updateStrategy.rollingUpdate: {WARN_ZERO_BUDGETS}",
    )


def test_one_zero_budget_is_quiet(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["lifecycle"] = {"updateStrategy": {"rollingUpdate": {"maxSurge": 0}}}
    assert review(request_for, isvc).warnings == ()


# -- References and names ------------------------------------------------------------------

SUBDOMAIN = (
    "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
    "ending with a letter or digit, at most 253 characters)"
)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("runtime", "name"), "Srt_Llama", f'spec.runtime.name: {SUBDOMAIN}, got "Srt_Llama"'),
        (
            ("runtime", "kind"),
            "Runtime",
            "spec.runtime.kind: must be one of ServingRuntime, ClusterServingRuntime, "
            'got "Runtime"',
        ),
        (("model", "name"), "", f'spec.model.name: {SUBDOMAIN}, got ""'),
        (
            ("model", "kind"),
            "Model",
            'spec.model.kind: must be one of ClusterBaseModel, BaseModel, got "Model"',
        ),
    ],
)
def test_references(
    request_for: Request, isvc: dict, path: tuple[str, str], value: str, message: str
) -> None:
    isvc["spec"][path[0]][path[1]] = value
    assert refused(request_for, isvc) == [message]


def test_reference_kinds_admitted(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["runtime"]["kind"] = "ServingRuntime"
    isvc["spec"]["model"]["kind"] = "BaseModel"
    assert review(request_for, isvc).allowed


def test_missing_runtime_name(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["runtime"] = {}
    assert refused(request_for, isvc) == [f"spec.runtime.name: {SUBDOMAIN}, got null"]


def test_replica_refs(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["replicaRefs"] = [{"name": "pool-a"}, {"name": "Pool B"}]
    assert refused(request_for, isvc) == [f'spec.replicaRefs[1].name: {SUBDOMAIN}, got "Pool B"']
    isvc["spec"]["replicaRefs"] = "pool-a"
    assert refused(request_for, isvc) == ['spec.replicaRefs: must be a list, got "pool-a"']


@pytest.mark.parametrize("name", ["1chat", "Chat", "chat-", "chat.v2"])
def test_name_format(request_for: Request, isvc: dict, name: str) -> None:
    isvc["metadata"]["name"] = name
    assert refused(request_for, isvc) == [
        "metadata.name: must start with a lowercase letter and hold only lowercase letters, "
        f"digits and '-', ending with a letter or digit, got \"{name}\""
    ]


def test_name_length_follows_the_components(request_for: Request, isvc: dict) -> None:
    assert (max_name_length("engine"), max_name_length("decoder")) == (47, 46)
    isvc["metadata"]["name"] = "a" * 47
    assert refused(request_for, isvc) == [
        "metadata.name: must be at most 46 characters with a decoder, so that its revision "
        "names (<name>-decoder-<hash>) fit in 63 characters, got 47"
    ]
    del isvc["spec"]["decoder"]
    assert review(request_for, isvc).allowed


def test_generated_name_is_not_checked(request_for: Request, isvc: dict) -> None:
    isvc["metadata"] = {"generateName": "chat-"}
    assert review(request_for, isvc).allowed


def test_deployment_mode(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["deploymentMode"] = "OMENAtive"
    answer = review(request_for, isvc)
    assert answer.allowed
    assert answer.warnings == (
        'spec.deploymentMode: "OMENAtive" is not a deployment mode that this OME knows '
        "(RawDeployment, Serverless, MultiNode, PDDisaggregated, OMENative); no OMENative "
        "controller acts on it",
    )
    isvc["spec"]["deploymentMode"] = 7
    assert refused(request_for, isvc) == [
        "spec.deploymentMode: must be a deployment mode such as OMENative, got 7"
    ]


# -- Operations, ratcheting, the model -----------------------------------------------------


def test_delete_and_connect_are_admitted(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["minReplicas"] = -1
    assert review(request_for, None, operation="DELETE", old=isvc).allowed
    assert review(request_for, isvc, operation="CONNECT").allowed


def test_update_of_a_deleting_object_is_admitted(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["rollout"] = {"groups": [{"components": ["engine"], "policyRef": {"name": "p"}}]}
    isvc["metadata"]["deletionTimestamp"] = "2026-09-28T10:12:04Z"
    isvc["metadata"]["finalizers"] = []
    assert review(request_for, isvc, operation="UPDATE", old=isvc).allowed


def test_update_ratchets_unchanged_values(request_for: Request, isvc: dict) -> None:
    stored = {**isvc, "spec": {**isvc["spec"], "engine": {"minReplicas": 1, "maxReplicas": 0}}}
    labelled = {**stored, "metadata": {**stored["metadata"], "labels": {"team": "a"}}}
    answer = review(request_for, labelled, operation="UPDATE", old=stored)
    assert answer.allowed
    assert answer.warnings == (f"spec.engine.maxReplicas: {MAX_REPLICAS_ZERO}{RATCHET_NOTE}",)
    # Ratcheting is per value: another field may change, but a change to this one must fix it.
    engine = {"minReplicas": 2, "maxReplicas": 0}
    changed = {**labelled, "spec": {**labelled["spec"], "engine": engine}}
    assert review(request_for, changed, operation="UPDATE", old=stored).allowed
    engine = {"minReplicas": 1, "maxReplicas": -1}
    changed = {**labelled, "spec": {**labelled["spec"], "engine": engine}}
    assert refused(request_for, changed, operation="UPDATE", old=stored) == [
        "spec.engine.maxReplicas: must be >= 1, got -1"
    ]


def test_cross_field_error_ratchets_only_when_both_unchanged(
    request_for: Request, isvc: dict
) -> None:
    stored = {**isvc, "spec": {**isvc["spec"], "engine": {"minReplicas": 5, "maxReplicas": 3}}}
    assert review(request_for, stored, operation="UPDATE", old=stored).allowed
    raised = {**stored, "spec": {**stored["spec"], "engine": {"minReplicas": 6, "maxReplicas": 3}}}
    assert refused(request_for, raised, operation="UPDATE", old=stored) == [
        "spec.engine.minReplicas: must be <= maxReplicas (3), got 6"
    ]


def test_wrong_kind_and_missing_object(request_for: Request, isvc: dict) -> None:
    answer = VALIDATOR.review(request_for(isvc, kind="Pod"))
    assert not answer.allowed and answer.code == 400
    assert answer.message == "this webhook validates InferenceServices, got kind Pod"
    answer = VALIDATOR.review(request_for(None, operation="CREATE", kind="InferenceService"))
    assert not answer.allowed and answer.code == 400
    assert answer.message == "request.object is missing from the CREATE review"


def test_model_errors_refuse_what_the_rules_miss(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["labels"] = {"team": 7}
    isvc["spec"]["paused"] = "maybe"
    messages = refused(request_for, isvc)
    assert messages == [
        "spec.engine.labels.team: Input should be a valid string",
        "spec.paused: Input should be a valid boolean, unable to interpret input",
    ]


def test_many_errors_are_counted(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["lifecycle"] = {
        key: "bad"
        for key in (
            "restartPolicy",
            "readyPolicy",
            "instanceReadyTimeout",
            "minReadySeconds",
            "repairBatchSize",
            "updateStrategy",
            "migrationPolicy",
            "updateRetry",
        )
    }
    isvc["spec"]["router"] = {"minReplicas": "x", "maxReplicas": "y"}
    isvc["spec"]["model"]["name"] = "X"
    isvc["spec"]["runtime"]["name"] = "Y"
    messages = refused(request_for, isvc)
    assert len(messages) == 11 and messages[-1] == "and 2 more"


# -- Migration requests (the rules themselves: test_webhooks_migration.py) -----------------


def test_migration_request_without_ready_timeout_warns(request_for: Request, isvc: dict) -> None:
    isvc["metadata"]["annotations"] = {
        REQUEST_KEY: (
            '{"schemaVersion":"v1","component":"engine","instance":3,"from_node":"node-a"}'
        )
    }
    answer = review(request_for, isvc)
    assert answer.allowed
    assert answer.warnings == (
        f"spec.engine.lifecycle.instanceReadyTimeout: {WARN_NO_READY_TIMEOUT}",
    )
    isvc["spec"]["engine"]["lifecycle"] = {"instanceReadyTimeout": "20m"}
    assert review(request_for, isvc).warnings == ()


def test_long_name_stored_before_ratchets(request_for: Request, isvc: dict) -> None:
    isvc["metadata"]["name"] = "a" * 47
    changed = {**isvc, "spec": {**isvc["spec"], "decoder": {"minReplicas": 2, "maxReplicas": 2}}}
    answer = review(request_for, changed, operation="UPDATE", old=isvc)
    assert answer.allowed
    assert answer.warnings == (
        "metadata.name: must be at most 46 characters with a decoder, so that its revision "
        f"names (<name>-decoder-<hash>) fit in 63 characters, got 47{RATCHET_NOTE}",
    )


def test_model_check_ratchets_with_the_spec(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["engine"]["labels"] = {"team": 7}
    labelled = {**isvc, "metadata": {**isvc["metadata"], "labels": {"team": "a"}}}
    answer = review(request_for, labelled, operation="UPDATE", old=isvc)
    assert answer.allowed and answer.warnings == ()  # spec unchanged: not parsed again
    paused = {**isvc, "spec": {**isvc["spec"], "paused": True}}
    answer = review(request_for, paused, operation="UPDATE", old=isvc)
    assert answer.warnings == (
        f"spec.engine.labels.team: Input should be a valid string{RATCHET_NOTE}",
    )
    engine = {**isvc["spec"]["engine"], "labels": {"team": 8}}
    relabelled = {**isvc, "spec": {**isvc["spec"], "engine": engine}}
    assert refused(request_for, relabelled, operation="UPDATE", old=isvc) == [
        "spec.engine.labels.team: Input should be a valid string"
    ]
