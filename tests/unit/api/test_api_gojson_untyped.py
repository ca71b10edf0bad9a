"""Go's json.Marshal of a decoded (untyped) value, as the API server re-encodes a RawExtension."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from omed.api.gojson import marshal_untyped


def test_keys_sorted_compact_and_html_safe() -> None:
    value = {"b": [1, 2.5, None, True], "a": {"z": "x && y <tag>", "c": "\u2028"}}
    assert marshal_untyped(value) == (
        '{"a":{"c":"\\u2028","z":"x \\u0026\\u0026 y \\u003ctag\\u003e"},"b":[1,2.5,null,true]}'
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=10,
)


@given(JSON)
def test_the_same_content_comes_back(value: object) -> None:
    assert json.loads(marshal_untyped(value)) == value
