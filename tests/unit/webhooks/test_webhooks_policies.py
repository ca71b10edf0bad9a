"""RolloutPolicy and AutoscalerPolicy references: refused while their feature is off, checked
for shape while it is on, refused outside the places OME reads them."""

from __future__ import annotations

from typing import Any

import pytest
from webhook_world import Request

from omed.webhooks.inferenceservice import InferenceServiceValidator
from omed.webhooks.policies import FeatureGates

OFF = InferenceServiceValidator()
ON = InferenceServiceValidator(gates=FeatureGates(rollout_policy=True, autoscaler_policy=True))

AUTOSCALER_OFF = (
    'spec.engine.autoscalerPolicyRef: references AutoscalerPolicy "request-activity-v1", but '
    "the AutoscalerPolicy feature is off on this cluster: remove the reference, or turn the "
    "feature on and restart the manager (AutoscalerPolicyFeatureDisabled)"
)
ROLLOUT_OFF = (
    'spec.rollout.groups[1].policyRef: references RolloutPolicy "canary-10", but the '
    "RolloutPolicy feature is off on this cluster, so the reference would do nothing: inline "
    "the progression, or turn the feature on and restart the manager "
    "(RolloutPolicyRefUnsupported)"
)


def with_autoscaler_ref(isvc: dict[str, Any], ref: Any) -> dict[str, Any]:
    isvc["spec"]["engine"]["autoscalerPolicyRef"] = ref
    return isvc


def with_rollout_ref(isvc: dict[str, Any], ref: Any) -> dict[str, Any]:
    isvc["spec"]["rollout"] = {
        "groups": [
            {"components": ["router"]},
            {"components": ["engine", "decoder"], "policyRef": ref},
        ]
    }
    return isvc


def test_gates_are_off_by_default() -> None:
    assert FeatureGates() == FeatureGates(rollout_policy=False, autoscaler_policy=False)


def test_autoscaler_ref_refused_while_off(request_for: Request, isvc: dict) -> None:
    answer = OFF.review(request_for(with_autoscaler_ref(isvc, {"name": "request-activity-v1"})))
    assert not answer.allowed
    assert answer.message == AUTOSCALER_OFF


def test_rollout_ref_refused_while_off(request_for: Request, isvc: dict) -> None:
    ref = {"name": "canary-10", "progression": "canary"}
    answer = OFF.review(request_for(with_rollout_ref(isvc, ref)))
    assert not answer.allowed
    assert answer.message == ROLLOUT_OFF


def test_refs_refused_while_off_even_on_unchanged_update(request_for: Request, isvc: dict) -> None:
    stored = with_autoscaler_ref(isvc, {"name": "request-activity-v1"})
    answer = OFF.review(request_for(stored, operation="UPDATE", old=stored))
    assert not answer.allowed
    assert "AutoscalerPolicyFeatureDisabled" in answer.message


def test_refs_admitted_while_on(request_for: Request, isvc: dict) -> None:
    with_autoscaler_ref(isvc, {"name": "request-activity-v1", "kind": "AutoscalerPolicy"})
    with_rollout_ref(isvc, {"name": "canary-10", "kind": "RolloutPolicy", "progression": "canary"})
    answer = ON.review(request_for(isvc))
    assert answer.allowed, answer.message


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            {"name": "p", "kind": "ClusterAutoscalerPolicy"},
            "spec.engine.autoscalerPolicyRef.kind: must be AutoscalerPolicy, got "
            '"ClusterAutoscalerPolicy" (AutoscalerPolicyRefKindReserved)',
        ),
        (
            {"name": "P"},
            "spec.engine.autoscalerPolicyRef.name: must be a DNS-1123 subdomain (lowercase "
            "letters, digits, '-' and '.', starting and ending with a letter or digit, at most "
            '253 characters), got "P"',
        ),
        ("p", 'spec.engine.autoscalerPolicyRef: must be an object, got "p"'),
    ],
)
def test_autoscaler_ref_shape_while_on(
    request_for: Request, isvc: dict, ref: Any, message: str
) -> None:
    answer = ON.review(request_for(with_autoscaler_ref(isvc, ref)))
    assert answer.message == message


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (
            {"name": "p", "kind": "ClusterRolloutPolicy", "progression": "canary"},
            "spec.rollout.groups[1].policyRef.kind: must be RolloutPolicy, got "
            '"ClusterRolloutPolicy" (RolloutPolicyRefInvalid)',
        ),
        (
            {"name": "p", "progression": "linear"},
            "spec.rollout.groups[1].policyRef.progression: must be one of canary, blueGreen, "
            'rollingUpdate, got "linear" (RolloutPolicyRefInvalid)',
        ),
        (
            {"progression": "canary"},
            "spec.rollout.groups[1].policyRef.name: must be a DNS-1123 subdomain (lowercase "
            "letters, digits, '-' and '.', starting and ending with a letter or digit, at most "
            "253 characters), got null (RolloutPolicyRefInvalid)",
        ),
    ],
)
def test_rollout_ref_shape_while_on(
    request_for: Request, isvc: dict, ref: Any, message: str
) -> None:
    answer = ON.review(request_for(with_rollout_ref(isvc, ref)))
    assert answer.message == message


@pytest.mark.parametrize(
    ("field", "off_reason", "right_place"),
    [
        (
            "autoscalerPolicyRef",
            "AutoscalerPolicyFeatureDisabled",
            "spec.<component>.autoscalerPolicyRef",
        ),
        ("rolloutPolicyRef", "RolloutPolicyRefUnsupported", "spec.rollout.groups[].policyRef"),
    ],
)
def test_misplaced_refs(
    request_for: Request, isvc: dict, field: str, off_reason: str, right_place: str
) -> None:
    isvc["spec"][field] = {"name": "p"}
    off = OFF.review(request_for(isvc))
    assert not off.allowed and off.message.startswith(f"spec.{field}: references")
    assert off.message.endswith(f"({off_reason})")
    on = ON.review(request_for(isvc))
    kind = "AutoscalerPolicy" if field.startswith("autoscaler") else "RolloutPolicy"
    assert on.message == (
        f"spec.{field}: OME reads no {kind} reference here, so it would do nothing: put it in "
        f"{right_place} (PolicyRefMisplaced)"
    )


def test_rollout_level_policy_ref_is_misplaced(request_for: Request, isvc: dict) -> None:
    isvc["spec"]["rollout"] = {"policyRef": {"name": "p"}}
    assert "RolloutPolicyRefUnsupported" in OFF.review(request_for(isvc)).message
    assert "PolicyRefMisplaced" in ON.review(request_for(isvc)).message
