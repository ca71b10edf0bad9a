"""Revision names are a pure function of the pod template's content."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omed.api.revision import (
    MAX_REVISION_NAME_LENGTH,
    canonical_json,
    is_revision_hash,
    revision_hash,
    revision_name,
    template_hash,
)

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "chat"}},
    "spec": {"containers": [{"name": "ome-container", "image": "example/sglang:v0.4.9"}]},
}


def test_revision_name_has_the_documented_shape() -> None:
    name = revision_name(isvc="chat", component="engine", template=TEMPLATE)
    assert re.fullmatch(r"chat-engine-[0-9a-f]{8}", name)


def test_hash_is_pinned() -> None:
    # Changing the canonical form renames every revision of every cluster: a rollout of
    # everything. This value must only change on purpose.
    assert canonical_json(TEMPLATE) == (
        b'{"metadata":{"labels":{"app":"chat"}},"spec":{"containers":'
        b'[{"image":"example/sglang:v0.4.9","name":"ome-container"}]}}'
    )
    assert template_hash(TEMPLATE) == "cdbf2e11"
    assert template_hash({}) == hashlib.sha256(b"{}").hexdigest()[:8]


def test_key_order_does_not_matter() -> None:
    reordered = {
        "spec": {"containers": [{"image": "example/sglang:v0.4.9", "name": "ome-container"}]},
        "metadata": {"labels": {"app": "chat"}},
    }
    assert template_hash(reordered) == template_hash(TEMPLATE)


def test_null_fields_do_not_matter() -> None:
    with_nulls = {
        "metadata": {"labels": {"app": "chat"}, "annotations": None},
        "spec": {
            "containers": [
                {"name": "ome-container", "image": "example/sglang:v0.4.9", "args": None}
            ],
            "nodeSelector": None,
        },
    }
    assert template_hash(with_nulls) == template_hash(TEMPLATE)


def test_list_order_matters() -> None:
    one = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    other = {"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}
    assert template_hash(one) != template_hash(other)


def test_any_content_change_changes_the_hash() -> None:
    changed = {
        "metadata": {"labels": {"app": "chat"}},
        "spec": {"containers": [{"name": "ome-container", "image": "example/sglang:v0.5.0"}]},
    }
    assert template_hash(changed) != template_hash(TEMPLATE)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**53), max_value=2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_hash_is_deterministic_and_ignores_key_order(template: dict[str, Any]) -> None:
    reversed_template = dict(reversed(list(template.items())))
    digest = template_hash(template)
    assert digest == template_hash(reversed_template)
    assert is_revision_hash(digest)


def test_revision_hash_round_trips() -> None:
    name = revision_name(isvc="chat", component="engine", template=TEMPLATE)
    assert revision_hash(name) == template_hash(TEMPLATE)
    assert revision_hash("chat-engine-7f9c4d2b") == "7f9c4d2b"


@pytest.mark.parametrize(
    "text", ["7f9c4d2b", "chat-engine-7F9C4D2B", "chat-engine-7f9c4d2", "x7f9c4d2b"]
)
def test_revision_hash_refuses_non_revisions(text: str) -> None:
    with pytest.raises(ValueError, match="not a revision name"):
        revision_hash(text)


def test_is_revision_hash() -> None:
    assert is_revision_hash("7f9c4d2b")
    assert not is_revision_hash("7f9c4d2")
    assert not is_revision_hash("chat-engine-7f9c4d2b")


def test_revision_names_longer_than_a_label_value_are_refused() -> None:
    longest = "a" * (MAX_REVISION_NAME_LENGTH - len("-engine-") - 8)
    assert len(revision_name(isvc=longest, component="engine", template={})) == 63
    with pytest.raises(ValueError, match="a label value allows 63"):
        revision_name(isvc=longest + "a", component="engine", template={})
