"""Kubernetes object name rules (apimachinery's ``IsDNS1123Label`` and
``IsDNS1123Subdomain``), for every part of omed that checks a name before using it: flags,
webhook rules, the preflight tool's arguments."""

from __future__ import annotations

import re
from typing import Final

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
LABEL_VALUE_MAX: Final = 63
"""apimachinery's ``LabelValueMaxLength``: a label value (which may also hold ``_``, capitals
and ``.``) is at most as long as a DNS label."""
_LABEL: Final = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL: Final = re.compile(_LABEL)
_DNS1123_SUBDOMAIN: Final = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def is_dns1123_label(value: object) -> bool:
    """A namespace name, say: 1 to 63 lowercase letters, digits and ``-``, starting and
    ending with a letter or digit."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= DNS1123_LABEL_MAX
        and _DNS1123_LABEL.fullmatch(value) is not None
    )


def is_dns1123_subdomain(value: object) -> bool:
    """Most object names: 1 to 253 lowercase letters, digits, ``-`` and ``.``, each
    dot-separated part starting and ending with a letter or digit."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= DNS1123_SUBDOMAIN_MAX
        and _DNS1123_SUBDOMAIN.fullmatch(value) is not None
    )
