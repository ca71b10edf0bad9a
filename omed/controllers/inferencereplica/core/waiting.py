"""Waiting tokens: what holds an Instance's Create, Update or Restart, in its row.

Why: ``kubectl ome instance status`` shows ``operation.waiting`` as the op hold, and a held
operation records the Instance's last failure under the same token, so a user sees why an
operation doesn't move without reading pods and events. The tokens omed sets, first match
wins:

* ``Paused``: the InferenceReplica is paused (no pod write at all);
* ``QuotaExceeded`` / ``AdmissionUnavailable``: a create of one of the operation's missing
  pods was refused by ResourceQuota admission, or because an admission webhook couldn't be
  called (the controller keeps the API server's last answer per Instance, ``refused``);
* ``PodGroupTerminating``: the Instance's PodGroup is being deleted, so its missing pods
  wait (:mod:`.podgroups`);
* ``NodeUnknown``: a pod of the operation sits on a node that stopped reporting (the pod's
  Ready is not True with reason NodeNotReady, or its status reason is NodeLost): it can't
  get Ready, and deleting it waits for the node;
* ``Unschedulable``: a live pod of the operation has PodScheduled False, reason
  Unschedulable.

The pods of an Update's surge Instance count as the operation's own; a migration's surge
gets ``QuotaExceeded`` / ``AdmissionUnavailable`` from its own drive (:mod:`.ops.migrate`).
The token is cleared in the pass that no longer sees its cause. SourceUnrouted and
CapacityProvisioning are never set (a migration reports through its record; TPU slices
aren't run), and a token omed doesn't know is left alone.

Invariant: pure; a token follows only from this pass's pods, refusals, PodGroups and pause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from omed.controllers.inferencereplica.core import names
from omed.controllers.inferencereplica.core.model import CreateRefusal
from omed.controllers.inferencereplica.core.work import InstanceWork, PassWork

HELD_TYPES = frozenset({"Create", "Update", "Restart"})


def refusal_token(status: int, message: str) -> str | None:
    """The token of a refused pod write (the API server's status code and message): 403
    ``exceeded quota`` (ResourceQuota admission) is QuotaExceeded; ``failed calling
    webhook`` (an admission webhook unreachable, failurePolicy Fail) is AdmissionUnavailable."""
    lowered = message.lower()
    if "failed calling webhook" in lowered:
        return names.WAITING_ADMISSION
    if status == 403 and "exceeded quota" in lowered:
        return names.WAITING_QUOTA
    return None


def permanent_refusal(status: int, message: str, causes: Sequence[str] = ()) -> str | None:
    """The class of a pod create the API server refused for good, as upstream names it:
    InvalidPodSpec for a 422 (the body breaks validation), NamespaceTerminating for a 403
    whose cause (or text) says the namespace is being terminated; None for anything else."""
    if status == 422:
        return names.REJECTION_INVALID_POD_SPEC
    if status == 403 and (
        "NamespaceTerminating" in causes or "because it is being terminated" in message
    ):
        return names.REJECTION_NAMESPACE_TERMINATING
    return None


def mark(
    work: PassWork, instances: list[InstanceWork], refused: Mapping[int, CreateRefusal]
) -> None:
    """Set or clear ``operation.waiting`` on every Create, Update and Restart in flight."""
    by_index = {inst.index: inst for inst in instances}
    for inst in instances:
        op = inst.op
        if op is None or op.type not in HELD_TYPES or not inst.keep:
            continue
        found = hold(work, inst, by_index, refused)
        token, pod = found if found is not None else (None, None)
        inst.waiting_pod = pod
        if token is None and op.waiting not in names.WAITING_TOKENS_SET:
            continue  # nothing holds it, or a token of someone else's: leave it
        if op.waiting != token:
            inst.op = op.model_copy(update={"waiting": token})


def hold(
    work: PassWork,
    inst: InstanceWork,
    by_index: Mapping[int, InstanceWork],
    refused: Mapping[int, CreateRefusal],
) -> tuple[str, str | None] | None:
    """The token that holds ``inst``'s operation and the pod that shows it, if any."""
    if not work.act:
        return names.WAITING_PAUSED, None
    op = inst.op
    assert op is not None
    members = [inst]
    if op.surge_index is not None and op.surge_index in by_index:
        members.append(by_index[op.surge_index])
    for member in members:
        refusal = refused.get(member.index)
        if refusal is not None and not refusal.permanent and member.facts.missing:
            return refusal.token, refusal.pod
        gang = work.gangs.held.get(member.index)
        if gang is not None:
            return gang, None
    pods = [pod for member in members for pod in member.facts.pods]
    lost = next((pod for pod in pods if pod.node_lost), None)
    if lost is not None:
        return names.WAITING_NODE_UNKNOWN, lost.name
    pending = next((pod for pod in pods if pod.unschedulable and not pod.terminating), None)
    if pending is not None:
        return names.WAITING_UNSCHEDULABLE, pending.name
    return None
