"""The surge's pods: built from the source's running revision, kept off the node it leaves.

Why a module: rendering is the part of a migration that other code reads back (the
scheduler, the sim, the tests): the required ``NotIn`` node affinity, the preferred hints,
and the revision the pods come from; kept apart from the state machine (:mod:`.migrate`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import orjson

from omed.api.affinity import required_hostnames
from omed.api.constants import LABEL_HOSTNAME
from omed.controllers.inferencereplica.core.model import ReplicaTarget
from omed.controllers.inferencereplica.core.ops.migratenames import HINT_WEIGHT


def source_payload(
    target: ReplicaTarget, revision: str, payloads: Mapping[str, bytes]
) -> bytes | None:
    if revision == target.update_revision and target.revision_payload:
        return target.revision_payload
    found = payloads.get(revision)
    if found:
        return found
    if revision in (target.update_revision, target.legacy_revision):
        return b""  # a target built without a record (tests): the runner templates
    return None


def pinned_to(payload: bytes, node: str) -> bool:
    """The source spec's required node affinity pins the hostname to ``node``: a
    ``kubernetes.io/hostname In`` requirement of the pod or worker spec whose values are
    exactly ``[node]`` (one that also allows other nodes leaves the surge somewhere to go)."""
    if not payload:
        return False
    doc = orjson.loads(payload)
    return any(
        list(values) == [node]
        for key in ("podSpec", "workerPodSpec")
        for values in required_hostnames(doc.get(key) or {})
    )


def with_overlay(
    pod: dict[str, Any],
    *,
    from_node: str | None,
    hints: tuple[str, ...],
    exclude: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``pod`` kept off ``from_node`` and the ``exclude`` nodes (one required ``NotIn`` on the
    hostname, added to every node selector term, since terms are ORed) and drawn to ``hints``
    (one preferred term, so every hint weighs the same)."""
    out = copy.deepcopy(pod)
    spec = out.setdefault("spec", {})
    affinity = spec.setdefault("affinity", {}) or {}
    spec["affinity"] = affinity
    node_affinity = affinity.setdefault("nodeAffinity", {}) or {}
    affinity["nodeAffinity"] = node_affinity
    avoided = [node for node in (from_node, *exclude) if node]
    avoided = sorted(set(avoided), key=avoided.index)
    if avoided:
        avoid = {"key": LABEL_HOSTNAME, "operator": "NotIn", "values": avoided}
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.get("nodeSelectorTerms") or [{}]
        required["nodeSelectorTerms"] = [
            {**term, "matchExpressions": [*(term.get("matchExpressions") or ()), avoid]}
            for term in terms
        ]
    wanted = [hint for hint in hints if hint and hint != from_node]
    if wanted:
        preferred = node_affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
        preferred.append(
            {
                "weight": HINT_WEIGHT,
                "preference": {
                    "matchExpressions": [
                        {"key": LABEL_HOSTNAME, "operator": "In", "values": wanted}
                    ]
                },
            }
        )
    return out
