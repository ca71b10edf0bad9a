"""``kubectl ome instance release-held``: the checks, the preview and the ActionResult.

Why: release-held is the plugin's one write. It sets ``ome.io/release-held-revision`` on the
component's InferenceReplica to a Held block's full target revision, and OME then removes the
block and tries the revision again. A release on the wrong evidence (stale status, a replica
that isn't OME's, a block that isn't Held) would send OME back to a revision for no reason, so
the command refuses unless every check passes, on a read made after the user confirms.
This module decides the checks, the preview and the result from objects already read (no
I/O); the flow (read, preview, prompt, read again, patch) is in :mod:`omed.cli.kubectl_ome`.

Invariant: a refusal changes nothing; every refusal names its cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from omed.api.constants import (
    ANNOTATION_CONTROLLER_WRITE,
    ANNOTATION_RELEASE_HELD_REVISION,
    CONTROLLER_WRITE_TRUE,
)
from omed.cli.instances import OK, Collection, block_problems
from omed.statuscodec import GUARDED_ACTION_MAX_ROWS

ACTION: Final = "instance release-held"
BUDGET_SECONDS: Final = 45.0
"""release-held has 45 seconds in all, including the time the prompt waits."""
VALUE_WIDTH: Final = 53
PREVIEW_TITLE: Final = "HELD RELEASE PREVIEW"
HINT: Final = "Use -o json or -o yaml for full values."
DRY_RUN_MODES: Final = ("none", "client", "server")

MESSAGE_APPLIED: Final = (
    "API accepted release annotation request; controller removes the Held block and deletes "
    "the annotation when it next reconciles the InferenceReplica."
)
MESSAGE_CLIENT: Final = "Validated locally; no patch sent."
MESSAGE_SERVER: Final = (
    "API server validated the release annotation (server dry run); nothing stored."
)
NO_RELEASABLE_BLOCK: Final = "no releasable Held retry block for revision"


class Refused(Exception):
    """A check failed: ``error: <message>``, nothing changed, exit 1."""


@dataclass(frozen=True, slots=True)
class Target:
    """What a release would act on, as the checks found it."""

    namespace: str
    replica: str
    revision: str
    """The block's full target revision, which the annotation gets."""
    attempts: Any
    resource_version: str

    @property
    def hash(self) -> str:
        return self.revision[-8:]


def _matches(revision: str, wanted: str) -> bool:
    # imported here: the revision module brings the Go JSON encoder, which instance list
    # (importing this module for its wait and release commands) never needs
    from omed.api.revision import is_revision_hash

    return revision == wanted or (is_revision_hash(wanted) and revision.endswith("-" + wanted))


def check(collection: Collection, *, component: str, revision: str, now: int) -> Target:
    """The Held block ``revision`` (full name or hash) of ``component`` when it may be
    released; :class:`Refused` naming the first failed check otherwise."""
    isvc_meta = collection.isvc.get("metadata") or {}
    isvc_name = str(isvc_meta.get("name"))
    namespace = str(isvc_meta.get("namespace"))
    if isvc_meta.get("deletionTimestamp"):
        raise Refused(f"InferenceService {namespace}/{isvc_name} is being deleted")
    if not collection.listed:
        reason = collection.issues[0].message if collection.issues else "unknown"
        raise Refused(f"cannot check InferenceService {namespace}/{isvc_name}: {reason}")
    for issue in collection.issues:
        if issue.code == "IdentityRejected":
            raise Refused(
                f"InferenceService {namespace}/{isvc_name} has an unsafe identity: {issue.message}"
            )
        if issue.code == "StatusUndecodable":
            raise Refused(f"cannot check InferenceService {namespace}/{isvc_name}: {issue.message}")
    for read in collection.components.values():
        if len(read.rows) > GUARDED_ACTION_MAX_ROWS:
            raise Refused(
                f"InferenceReplica {namespace}/{read.replica} has {len(read.rows)} Instances, too "
                f"many to check safely (at most {GUARDED_ACTION_MAX_ROWS})"
            )
    cause = _first_cause(collection, component=component, revision=revision, now=now)
    if isinstance(cause, str):
        raise Refused(
            f"{NO_RELEASABLE_BLOCK} {revision} on component {component} of InferenceService "
            f"{namespace}/{isvc_name}: {cause}"
        )
    return cause


def _first_cause(
    collection: Collection, *, component: str, revision: str, now: int
) -> Target | str:
    """The causes of the first refusal, checked in order; a Target when none holds."""
    isvc_name = str((collection.isvc.get("metadata") or {}).get("name"))
    read = collection.components.get(component)
    if read is None or read.source is None:
        return f"no InferenceReplica of the InferenceService runs the {component}"
    source = read.source
    meta = source.get("metadata") or {}
    blocks = (source.get("status") or {}).get("retryBlocks") or []
    blocks = blocks if isinstance(blocks, list) else []
    found = [
        b
        for b in blocks
        if isinstance(b, Mapping) and _matches(str(b.get("targetRevision")), revision)
    ]
    if not found:
        return "no retry block matches --revision"
    block = found[0]
    if block.get("state") != "Held":
        return f"the block that matches is {block.get('state')}, not Held"
    for other in collection.components.values():
        if other.evidence != OK:
            return (
                f"InferenceReplica {other.replica} has stale status ({other.evidence}); wait for "
                "OME to catch up"
            )
    for raw in blocks:
        problems = block_problems(raw, isvc_name=isvc_name, component=component, now=now)
        if problems:
            return f"a retry block of InferenceReplica {read.replica} is malformed: " + "; ".join(
                problems
            )
    for other in collection.components.values():
        other_meta = (other.source or {}).get("metadata") or {}
        if other_meta.get("deletionTimestamp"):
            return f"InferenceReplica {other.replica} is being deleted"
    annotations = meta.get("annotations") or {}
    if annotations.get(ANNOTATION_CONTROLLER_WRITE) != CONTROLLER_WRITE_TRUE:
        return (
            f"InferenceReplica {read.replica} lacks {ANNOTATION_CONTROLLER_WRITE}: "
            f'"{CONTROLLER_WRITE_TRUE}"'
        )
    return Target(
        namespace=str(meta.get("namespace")),
        replica=str(read.replica),
        revision=str(block["targetRevision"]),
        attempts=block.get("attemptsStarted"),
        resource_version=str(meta.get("resourceVersion", "")),
    )


def preview_rows(target: Target) -> list[list[str]]:
    """The HELD RELEASE PREVIEW table (stderr)."""
    return [
        ["FIELD", "VALUE"],
        ["target", f"InferenceReplica/{target.namespace}/{target.replica}"],
        ["revision", target.revision],
        ["state", "Held"],
        ["attempts", str(target.attempts) if target.attempts is not None else "-"],
        ["annotation", f"{ANNOTATION_RELEASE_HELD_REVISION}={target.revision}"],
    ]


def patch(target: Target) -> dict[str, Any]:
    """A merge patch that sets the annotation, only on the version the checks read (the API
    server refuses it with a conflict if the replica changed since)."""
    return {
        "metadata": {
            "resourceVersion": target.resource_version,
            "annotations": {ANNOTATION_RELEASE_HELD_REVISION: target.revision},
        }
    }


def result(
    target: Target,
    *,
    isvc: str,
    component: str,
    dry_run: str,
) -> dict[str, Any]:
    """The ActionResult of a release that went through (or a dry run of one)."""
    applied = dry_run == "none"
    message = {
        "none": MESSAGE_APPLIED,
        "client": MESSAGE_CLIENT,
        "server": MESSAGE_SERVER,
    }[dry_run]
    return {
        "apiVersion": "cli.ome.io/v1alpha1",
        "kind": "ActionResult",
        "action": ACTION,
        "target": {
            "kind": "InferenceReplica",
            "namespace": target.namespace,
            "name": target.replica,
        },
        "dryRun": dry_run,
        "accepted": dry_run != "client",
        "applied": applied,
        "requestID": None,
        "revision": target.revision,
        "revisionHash": target.hash,
        "annotation": {ANNOTATION_RELEASE_HELD_REVISION: target.revision},
        "message": message,
        "followUp": (
            f"kubectl ome instance retry-blocks {isvc} --component={component} "
            f"-n {target.namespace}"
        ),
    }


def result_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """The FIELD VALUE table of an ActionResult (release-held's and migration start's),
    values cut at 53 characters."""
    target = report["target"]

    def yes(value: bool) -> str:
        return "Yes" if value else "No"

    rows = [
        ("action", report["action"]),
        ("target", f"{target['kind']}/{target['namespace']}/{target['name']}"),
        ("dry-run", report["dryRun"]),
        ("accepted", yes(report["accepted"])),
        ("applied", yes(report["applied"])),
        ("request-id", report["requestID"] or "-"),
        ("revision-hash", report["revisionHash"] or "-"),
        ("message", report["message"]),
        ("follow-up", report["followUp"]),
        ("hint", HINT),
    ]
    return [["FIELD", "VALUE"]] + [
        [field, value if len(value) <= VALUE_WIDTH else value[:VALUE_WIDTH] + "..."]
        for field, value in rows
    ]


def unheld(replica: Mapping[str, Any], *, revision: str | None) -> bool:
    """``--for=held-revision=unheld``: OME has taken the release (the annotation is gone) and
    the replica holds no block of ``revision`` (a full name or hash; ``None``: no block)."""
    meta = replica.get("metadata") or {}
    if ANNOTATION_RELEASE_HELD_REVISION in (meta.get("annotations") or {}):
        return False
    blocks = (replica.get("status") or {}).get("retryBlocks") or []
    return not any(
        isinstance(block, Mapping)
        and block.get("state") == "Held"
        and (revision is None or _matches(str(block.get("targetRevision")), revision))
        for block in (blocks if isinstance(blocks, list) else [])
    )
