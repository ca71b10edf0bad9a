"""Event reasons and messages about an InferenceReplica's status encoding.

Users filter events by these reasons (``kubectl get events --field-selector reason=...``) and
match these messages, so they live here once and the controller imports them.

Invariant: each message contains its fixed phrase verbatim:
``per-Instance status cannot be decoded (<reason>)``,
``per-Instance status was rewritten from <old> to <new>`` and
``status write of <n> bytes (<encoding>)``.
"""

from __future__ import annotations

from typing import Final

REASON_DECODE_FAILED: Final = "InstanceStatusDecodeFailed"
"""Warning: management of the InferenceReplica stopped; its stored status can't be decoded."""
REASON_CONVERTED: Final = "InstanceStatusConverted"
"""Normal: a status write changed how the rows are stored."""
REASON_SIZE_EXCEEDED: Final = "StatusSizeExceeded"
"""Warning: the API server rejected a status write as too large."""


def decode_failed_message(
    *, namespace: str, name: str, reason: str, detail: str | None = None
) -> str:
    """``InferenceReplica <ns>/<name>: per-Instance status cannot be decoded (<reason>)``; for
    ``size`` (a reason omed adds to OME's, see :data:`~omed.statuscodec.errors.DecodeReason`),
    followed by ``: <detail>``, the rows x cells and the bound, since the reason alone doesn't
    say what is too large."""
    message = (
        f"InferenceReplica {namespace}/{name}: per-Instance status cannot be decoded ({reason})"
    )
    if reason == "size" and detail:
        message += f": {detail}"
    return message


def converted_message(*, namespace: str, name: str, old: str, new: str) -> str:
    """``InferenceReplica <ns>/<name>: per-Instance status was rewritten from <old> to <new>``."""
    return (
        f"InferenceReplica {namespace}/{name}: per-Instance status was rewritten "
        f"from {old} to {new}"
    )


def size_exceeded_message(*, namespace: str, name: str, size: int, encoding: str) -> str:
    """``InferenceReplica <ns>/<name>: status write of <n> bytes (<encoding>) was rejected as
    too large``."""
    return (
        f"InferenceReplica {namespace}/{name}: status write of {size} bytes ({encoding}) "
        "was rejected as too large"
    )
