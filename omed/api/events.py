"""The vocabulary of Kubernetes events: their two types and how long a message may be.

Why here, beside the models: the controllers' pure cores decide which events a pass
records, with their type and message, and must not import the recorder (:mod:`omed.events`,
which does I/O) to spell them. The recorder uses these same names.
"""

from __future__ import annotations

from typing import Final

NORMAL: Final = "Normal"
"""An event that tells of progress."""
WARNING: Final = "Warning"
"""An event that tells of something a user may have to act on."""
EVENT_TYPES: Final = (NORMAL, WARNING)
"""The only types the API server accepts."""
MAX_MESSAGE_BYTES: Final = 1024
"""The longest message the API server stores (``events.k8s.io`` validation)."""


def truncate_message(message: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """Cut ``message`` to at most ``limit`` UTF-8 bytes without splitting a character."""
    raw = message.encode()
    if len(raw) <= limit:
        return message
    return raw[:limit].decode(errors="ignore")
