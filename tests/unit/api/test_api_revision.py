"""Revision names: upstream's hash of the template's Go bytes, and omed's earlier (legacy) hash.

The golden comparison with Go is in test_api_revision_golden.py; these pin the rules around it.
"""

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
    fnv32a,
    is_revision_hash,
    legacy_template_hash,
    payload_hash,
    revision_hash,
    revision_name,
    revision_payload,
)

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "chat"}},
    "spec": {"containers": [{"name": "ome-container", "image": "example/sglang:v0.4.9"}]},
}


def _hash(template: dict[str, Any], *, cc: int = 0, uid: str = "u") -> str:
    payload = revision_payload(pod_spec=template.get("spec"), pod_meta=template.get("metadata"))
    return payload_hash(payload, collision_count=cc, owner_uid=uid)


def test_fnv32a_is_go_hash_fnv_new32a() -> None:
    # The FNV-1a reference values: "" is the offset basis, "a" and "foobar" the published ones.
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968


def test_revision_name_has_the_documented_shape() -> None:
    name = revision_name(isvc="chat", component="engine", digest=_hash(TEMPLATE))
    assert re.fullmatch(r"chat-engine-[0-9a-f]{8}", name)


def test_the_collision_count_and_the_owner_change_the_hash() -> None:
    assert _hash(TEMPLATE, cc=1) != _hash(TEMPLATE)
    assert _hash(TEMPLATE, uid="other") != _hash(TEMPLATE)


def test_key_order_and_null_fields_do_not_matter() -> None:
    reordered = {
        "spec": {"containers": [{"image": "example/sglang:v0.4.9", "name": "ome-container"}]},
        "metadata": {"labels": {"app": "chat"}, "annotations": None},
    }
    assert _hash(reordered) == _hash(TEMPLATE)


def test_controller_signals_stay_out_of_the_hash() -> None:
    signals = {
        "metadata": {
            "labels": {"app": "chat", "kueue.x-k8s.io/queue-name": "gpu"},
            "annotations": {
                "ome.io/migration-request-v1-abc": "{}",
                "ome.io/rollout-paused": "true",
            },
        },
        "spec": TEMPLATE["spec"],
    }
    assert _hash(signals) == _hash(TEMPLATE)


def test_list_order_and_content_matter() -> None:
    one = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    other = {"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}
    assert _hash(one) != _hash(other)
    changed = {"metadata": TEMPLATE["metadata"], "spec": {"containers": [{"name": "x"}]}}
    assert _hash(changed) != _hash(TEMPLATE)


def test_a_template_go_cannot_decode_still_has_a_pure_hash() -> None:
    odd = {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "eighty"}]}]}}
    payload = revision_payload(pod_spec=odd["spec"], pod_meta=None)
    assert payload == b'{"podSpec":' + canonical_json(odd["spec"]) + b',"podMeta":null}'
    assert _hash(odd) == _hash(odd)


def test_the_legacy_hash_is_pinned() -> None:
    # Pods and rows written before upstream's hash carry these names: they must stay stable.
    assert canonical_json(TEMPLATE) == (
        b'{"metadata":{"labels":{"app":"chat"}},"spec":{"containers":'
        b'[{"image":"example/sglang:v0.4.9","name":"ome-container"}]}}'
    )
    assert legacy_template_hash(TEMPLATE) == "cdbf2e11"
    assert legacy_template_hash({}) == hashlib.sha256(b"{}").hexdigest()[:8]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**53), max_value=2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=4))
def test_hash_is_deterministic_for_any_spec(spec: dict[str, Any]) -> None:
    reversed_spec = dict(reversed(list(spec.items())))
    digest = _hash({"spec": spec})
    assert digest == _hash({"spec": reversed_spec})
    assert is_revision_hash(digest)


def test_revision_hash_round_trips() -> None:
    name = revision_name(isvc="chat", component="engine", digest="7f9c4d2b")
    assert revision_hash(name) == "7f9c4d2b"


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


def test_a_long_prefix_is_cut_never_the_hash() -> None:
    name = revision_name(isvc="x" * 80, component="engine", digest="7f9c4d2b")
    assert len(name) == MAX_REVISION_NAME_LENGTH
    assert name.endswith("-7f9c4d2b")
