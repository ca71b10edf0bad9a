"""Which hostnames a pod spec's required node affinity names.

Why a module: ``kubectl ome migration start`` and the InferenceReplica controller's
migration both refuse to move an Instance whose pods are tied to their node, and both find
the tie the same way, in the same fields; they ask different questions of what they find
(the CLI: the node is among a requirement's values; the controller: a requirement is that
node alone), so the walk is here and each question stays with its caller.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from omed.api.constants import LABEL_HOSTNAME


def required_hostnames(spec: Mapping[str, Any]) -> Iterator[Sequence[Any]]:
    """The ``values`` of every ``kubernetes.io/hostname In`` expression in ``spec``'s
    ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``, term by term
    (``()`` for an expression without values). A missing or null affinity, node affinity,
    requirement, term list, term or expression list yields nothing."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or ():
        for expression in (term or {}).get("matchExpressions") or ():
            if expression.get("key") == LABEL_HOSTNAME and expression.get("operator") == "In":
                yield expression.get("values") or ()
