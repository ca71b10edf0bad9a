"""References to RolloutPolicy and AutoscalerPolicy objects, allowed only with the feature on.

Why: both kinds are alpha and off by default. On a cluster without the feature, no
controller resolves a reference, so an admitted one would silently do nothing, or hold the
component forever. So the InferenceService webhook rejects InferenceServices that
reference that kind of policy, with AutoscalerPolicyFeatureDisabled or
RolloutPolicyRefUnsupported in the error. The manager decides at startup whether each
feature is on (it looks for the CRDs, as upstream does) and passes :class:`FeatureGates`.

Where references live, as upstream OME writes them:

* ``spec.<component>.autoscalerPolicyRef`` ({name, kind}) for an AutoscalerPolicy;
* ``spec.rollout.groups[<i>].policyRef`` ({name, kind, progression}) for a RolloutPolicy.

A reference anywhere else (``spec.autoscalerPolicyRef``, ``spec.rolloutPolicyRef``,
``spec.rollout.policyRef``) is read by nobody. With the feature off it is refused like any
other reference to that kind (same reason); with the feature on it is refused as
``PolicyRefMisplaced``, naming the right place: a reference that silently does nothing is
the very failure these rules exist to prevent.

Invariant: these refusals are never ratcheted (see :mod:`omed.webhooks.findings`): an
InferenceService with a reference to a kind whose feature is off can't be written at all,
except to finish its deletion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from omed.api.constants import COMPONENTS
from omed.api.names import is_dns1123_subdomain
from omed.webhooks.findings import (
    DNS1123_SUBDOMAIN_RULE,
    Findings,
    Loc,
    as_object,
    show,
)

REASON_AUTOSCALER_DISABLED: Final = "AutoscalerPolicyFeatureDisabled"
REASON_AUTOSCALER_KIND_RESERVED: Final = "AutoscalerPolicyRefKindReserved"
REASON_ROLLOUT_UNSUPPORTED: Final = "RolloutPolicyRefUnsupported"
REASON_ROLLOUT_INVALID: Final = "RolloutPolicyRefInvalid"
REASON_MISPLACED: Final = "PolicyRefMisplaced"

KIND_AUTOSCALER_POLICY: Final = "AutoscalerPolicy"
KIND_ROLLOUT_POLICY: Final = "RolloutPolicy"
PROGRESSIONS: Final = ("canary", "blueGreen", "rollingUpdate")
AUTOSCALER_REF_PLACE: Final = "spec.<component>.autoscalerPolicyRef"
ROLLOUT_REF_PLACE: Final = "spec.rollout.groups[].policyRef"


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureGates:
    """Which alpha features this cluster runs. Both are off unless the manager found their
    CRDs at startup."""

    rollout_policy: bool = False
    autoscaler_policy: bool = False


def _referenced(
    findings: Findings,
    loc: Loc,
    *,
    ref: Any,
    enabled: bool,
    off: str,
    kind: str,
    kind_reason: str,
) -> Mapping[str, Any] | None:
    """The reference ``ref`` to a ``kind`` policy, to check further; None when there is
    nothing more to check: its feature is off (refused with ``off``, never ratcheted), or it
    is null or no object. A ``kind`` other than the policy's is refused with
    ``kind_reason``."""
    if not enabled:
        findings.error(loc, off, ratchet=False)
        return None
    body = as_object(findings, loc, value=ref)
    if body is None:
        return None
    got = body.get("kind")
    if got not in (None, "", kind):
        findings.error((*loc, "kind"), f"must be {kind}, got {show(got)} ({kind_reason})")
    return body


def _ref_name(ref: Any) -> str:
    name = ref.get("name") if isinstance(ref, dict) else None
    return show(name) if name is not None else "a policy"


def _check_autoscaler(findings: Findings, loc: Loc, *, ref: Any, gates: FeatureGates) -> None:
    body = _referenced(
        findings,
        loc,
        ref=ref,
        enabled=gates.autoscaler_policy,
        off=f"references {KIND_AUTOSCALER_POLICY} {_ref_name(ref)}, but the "
        f"{KIND_AUTOSCALER_POLICY} feature is off on this cluster: remove the reference, "
        f"or turn the feature on and restart the manager ({REASON_AUTOSCALER_DISABLED})",
        kind=KIND_AUTOSCALER_POLICY,
        kind_reason=REASON_AUTOSCALER_KIND_RESERVED,
    )
    if body is None:
        return
    if not is_dns1123_subdomain(body.get("name")):
        findings.error((*loc, "name"), f"{DNS1123_SUBDOMAIN_RULE}, got {show(body.get('name'))}")


def _check_rollout(findings: Findings, loc: Loc, *, ref: Any, gates: FeatureGates) -> None:
    body = _referenced(
        findings,
        loc,
        ref=ref,
        enabled=gates.rollout_policy,
        off=f"references {KIND_ROLLOUT_POLICY} {_ref_name(ref)}, but the {KIND_ROLLOUT_POLICY} "
        "feature is off on this cluster, so the reference would do nothing: inline the "
        "progression, or turn the feature on and restart the manager "
        f"({REASON_ROLLOUT_UNSUPPORTED})",
        kind=KIND_ROLLOUT_POLICY,
        kind_reason=REASON_ROLLOUT_INVALID,
    )
    if body is None:
        return
    if not is_dns1123_subdomain(body.get("name")):
        findings.error(
            (*loc, "name"),
            f"{DNS1123_SUBDOMAIN_RULE}, got {show(body.get('name'))} ({REASON_ROLLOUT_INVALID})",
        )
    progression = body.get("progression")
    if progression not in PROGRESSIONS:
        findings.error(
            (*loc, "progression"),
            f"must be one of {', '.join(PROGRESSIONS)}, got {show(progression)} "
            f"({REASON_ROLLOUT_INVALID})",
        )


def _misplaced(findings: Findings, loc: Loc, *, kind: str, right_place: str) -> None:
    findings.error(
        loc,
        f"OME reads no {kind} reference here, so it would do nothing: "
        f"put it in {right_place} ({REASON_MISPLACED})",
        ratchet=False,
    )


def check_policy_refs(findings: Findings, spec: Mapping[str, Any], *, gates: FeatureGates) -> None:
    """Every policy reference in an InferenceService's ``spec``."""
    for component in COMPONENTS:
        body = spec.get(component)
        if isinstance(body, dict) and body.get("autoscalerPolicyRef") is not None:
            _check_autoscaler(
                findings,
                ("spec", component, "autoscalerPolicyRef"),
                ref=body["autoscalerPolicyRef"],
                gates=gates,
            )
    if spec.get("autoscalerPolicyRef") is not None:
        loc: Loc = ("spec", "autoscalerPolicyRef")
        if gates.autoscaler_policy:
            _misplaced(findings, loc, kind=KIND_AUTOSCALER_POLICY, right_place=AUTOSCALER_REF_PLACE)
        else:
            _check_autoscaler(findings, loc, ref=spec["autoscalerPolicyRef"], gates=gates)
    rollout = spec.get("rollout")
    misplaced_rollout: list[tuple[Loc, Any]] = []
    if spec.get("rolloutPolicyRef") is not None:
        misplaced_rollout.append((("spec", "rolloutPolicyRef"), spec["rolloutPolicyRef"]))
    if isinstance(rollout, dict) and rollout.get("policyRef") is not None:
        misplaced_rollout.append((("spec", "rollout", "policyRef"), rollout["policyRef"]))
    for loc, ref in misplaced_rollout:
        if gates.rollout_policy:
            _misplaced(findings, loc, kind=KIND_ROLLOUT_POLICY, right_place=ROLLOUT_REF_PLACE)
        else:
            _check_rollout(findings, loc, ref=ref, gates=gates)
    if not isinstance(rollout, dict):
        return
    groups = rollout.get("groups")
    if not isinstance(groups, list):
        return
    for i, group in enumerate(groups):
        if isinstance(group, dict) and group.get("policyRef") is not None:
            _check_rollout(
                findings,
                ("spec", "rollout", "groups", i, "policyRef"),
                ref=group["policyRef"],
                gates=gates,
            )
