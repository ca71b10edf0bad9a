"""The PodDisruptionBudget's ``minAvailable``, counted in pods.

Why pods, and an integer: an eviction takes one pod, and the API server's disruption
controller counts pods. It resolves a percentage or a ``maxUnavailable`` against the scale
of the pods' controller, which for OMENative pods is the InferenceReplica, counted in
Instances, not pods; an integer ``minAvailable`` needs no such lookup. So the setting, in
Instances, is turned into pods here, as upstream OME writes it:

    minAvailable = (Instances that must stay) x (pods per Instance)

where the Instances that must stay are, for ``minAvailable: n``, ``min(n, replicas)``; for
``maxUnavailable: n``, ``max(0, replicas - n)``; and for a percentage, that share of
``replicas`` rounded up (``minAvailable: "50%"`` of 3 keeps 2; ``maxUnavailable: "50%"`` of 3
lets 2 go, keeping 1), as Kubernetes rounds a PDB's percentages.

Invariant: the result is between 0 and ``replicas x pods_per_instance``.
"""

from __future__ import annotations

from omed.config.disruption import DisruptionBudget, DisruptionBudgetValue, InstancePercent


def _instances(value: DisruptionBudgetValue, replicas: int) -> int:
    if isinstance(value, InstancePercent):
        return -(-value.value * replicas // 100)  # ceiling division
    return value


def min_available_pods(budget: DisruptionBudget, *, replicas: int, pods_per_instance: int) -> int:
    """The pods that must stay available of a component of ``replicas`` Instances."""
    replicas = max(0, replicas)
    if budget.min_available is not None:
        keep = min(_instances(budget.min_available, replicas), replicas)
    else:
        assert budget.max_unavailable is not None  # the model holds exactly one bound
        keep = max(0, replicas - _instances(budget.max_unavailable, replicas))
    return keep * max(0, pods_per_instance)
