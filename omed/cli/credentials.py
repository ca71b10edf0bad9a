"""Text that looks like a credential, which the CLI redacts before it prints a value.

Why: a migration request's ``reason`` (and other free text a user wrote) is copied into
records, events and the audit ConfigMap; the CLI prints them, and must not spread a token
someone pasted there.
"""

from __future__ import annotations

import re
from typing import Final

CREDENTIAL_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "a secret assignment such as password= or token=",
        re.compile(
            r"\b(pass(word)?|passwd|pwd|token|secret|api[-_]?key|access[-_]?key|"
            r"client[-_]?secret|auth|credentials?)\s*[=:]",
            re.IGNORECASE,
        ),
    ),
    ("a bearer token", re.compile(r"\bbearer\b", re.IGNORECASE)),
    ("an access key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")),
    ("a token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9-]{10,})")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.")),
)
"""(what it is, pattern): text that looks like a credential."""
