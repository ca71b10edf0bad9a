"""The DNS-1123 name rules every name check in omed shares (omed.api.names)."""

from __future__ import annotations

import pytest

from omed.api.names import is_dns1123_label, is_dns1123_subdomain


@pytest.mark.parametrize(
    ("value", "label", "subdomain"),
    [
        ("ome", True, True),
        ("a", True, True),
        ("0abc-9", True, True),
        ("a" * 63, True, True),
        ("a" * 64, False, True),
        (".".join(["a" * 63] * 4)[:253], False, True),
        ("a" * 254, False, False),
        ("chat.engine", False, True),
        ("", False, False),
        ("-ome", False, False),
        ("ome-", False, False),
        ("Ome", False, False),
        ("ome_x", False, False),
        ("a..b", False, False),
        ("ome\n", False, False),
        (None, False, False),
        (7, False, False),
    ],
)
def test_names(value: object, label: bool, subdomain: bool) -> None:
    assert is_dns1123_label(value) is label
    assert is_dns1123_subdomain(value) is subdomain
