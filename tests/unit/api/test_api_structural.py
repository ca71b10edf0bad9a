"""The rewrite from pydantic's JSON Schema to structural OpenAPI, and the checker of the rules."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from omed.api.crdgen import DEFINITIONS, CrdDefinition, openapi_schema
from omed.api.structural import SchemaError, structural_violations, to_structural


def walk(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node under ``node``, with its path."""
    yield path or "<root>", node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), Mapping):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from walk(node["additionalProperties"], f"{path}.*")


@pytest.fixture(params=DEFINITIONS, ids=lambda d: d.name)
def schema(request: pytest.FixtureRequest) -> dict[str, Any]:
    definition: CrdDefinition = request.param
    return openapi_schema(definition)


def test_every_node_has_a_type_unless_int_or_string_or_free_form(schema: dict[str, Any]) -> None:
    untyped = [
        path
        for path, node in walk(schema)
        if "type" not in node
        and not node.get("x-kubernetes-int-or-string")
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ]
    assert untyped == []


def test_no_node_uses_json_schema_only_constructs(schema: dict[str, Any]) -> None:
    banned = {
        "$ref",
        "$defs",
        "anyOf",
        "allOf",
        "oneOf",
        "not",
        "const",
        "title",
        "default",
        "nullable",
    }
    found = [
        (path, sorted(banned & node.keys())) for path, node in walk(schema) if banned & node.keys()
    ]
    assert found == []


def test_int_or_string_nodes_have_no_type(schema: dict[str, Any]) -> None:
    nodes = [(path, node) for path, node in walk(schema) if node.get("x-kubernetes-int-or-string")]
    assert all("type" not in node for _, node in nodes)


def test_free_form_nodes_are_objects(schema: dict[str, Any]) -> None:
    nodes = [node for _, node in walk(schema) if node.get("x-kubernetes-preserve-unknown-fields")]
    assert nodes
    assert all(node["type"] == "object" for node in nodes)


def test_root_follows_the_rules_for_the_root(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object"
    assert "nullable" not in schema
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert schema["properties"]["apiVersion"]["type"] == "string"
    assert schema["properties"]["kind"]["type"] == "string"


def test_checker_finds_nothing_in_the_generated_schemas(schema: dict[str, Any]) -> None:
    assert structural_violations(schema) == []


def test_times_are_date_time_strings() -> None:
    irep = next(d for d in DEFINITIONS if d.kind == "InferenceReplica")
    rows = openapi_schema(irep)["properties"]["status"]["properties"]["instanceStatuses"]
    ready_since = rows["items"]["properties"]["readySince"]
    assert ready_since == {
        "description": "When the Instance last became Ready.",
        "type": "string",
        "format": "date-time",
    }


def test_list_maps_are_keyed_as_upstream() -> None:
    irep = next(d for d in DEFINITIONS if d.kind == "InferenceReplica")
    status = openapi_schema(irep)["properties"]["status"]["properties"]
    assert status["instanceStatuses"]["x-kubernetes-list-type"] == "map"
    assert status["instanceStatuses"]["x-kubernetes-list-map-keys"] == ["index"]
    assert status["migrations"]["x-kubernetes-list-type"] == "map"
    assert status["migrations"]["x-kubernetes-list-map-keys"] == ["requestUUID"]
    assert "index" in status["instanceStatuses"]["items"]["required"]
    assert "requestUUID" in status["migrations"]["items"]["required"]


# -- the rewrite on small inputs ---------------------------------------------------------------


def test_refs_are_inlined_and_field_descriptions_win() -> None:
    source = {
        "type": "object",
        "properties": {"inner": {"$ref": "#/$defs/Inner", "description": "field doc"}},
        "$defs": {
            "Inner": {
                "title": "Inner",
                "description": "model doc",
                "type": "object",
                "properties": {"n": {"type": "integer", "title": "N"}},
            }
        },
    }
    assert to_structural(source) == {
        "type": "object",
        "properties": {
            "inner": {
                "description": "field doc",
                "type": "object",
                "properties": {"n": {"type": "integer"}},
            }
        },
    }


def test_optional_fields_become_plain_types() -> None:
    source = {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "string", "enum": ["X"]}, {"type": "null"}], "default": None},
            "b": {
                "anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}],
                "x-kubernetes-list-type": "map",
            },
        },
        "$defs": {"B": {"type": "array", "items": {"type": "string"}}},
    }
    out = to_structural(source)
    assert out["properties"]["a"] == {"type": "string", "enum": ["X"]}
    assert out["properties"]["b"] == {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-list-type": "map",
    }


def test_json_schema_keywords_are_translated() -> None:
    source = {
        "type": "object",
        "additionalProperties": True,
        "properties": {
            "c": {"const": "Only", "type": "string"},
            "n": {"type": "integer", "exclusiveMinimum": 0},
            "d": {"type": "string", "description": "two\n   lines, ``code``"},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "f": {"type": "object", "additionalProperties": False},
        },
    }
    out = to_structural(source)
    assert out["x-kubernetes-preserve-unknown-fields"] is True
    assert "additionalProperties" not in out
    assert out["properties"]["c"] == {"type": "string", "enum": ["Only"]}
    assert out["properties"]["n"] == {"type": "integer", "minimum": 0, "exclusiveMinimum": True}
    assert out["properties"]["d"]["description"] == "two lines, code"
    assert out["properties"]["m"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert out["properties"]["f"] == {"type": "object"}
    assert list(out["properties"]) == ["c", "d", "f", "m", "n"]


def test_int_or_string_unions_are_recognised() -> None:
    source = {
        "type": "object",
        "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
    }
    assert to_structural(source)["properties"]["x"] == {"x-kubernetes-int-or-string": True}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {
                "type": "object",
                "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}},
            },
            "anyOf",
        ),
        ({"type": "object", "properties": {"x": {"oneOf": [{"type": "integer"}]}}}, "oneOf"),
        ({"type": "object", "properties": {"x": {"description": "no type"}}}, "no type"),
        ({"type": "object", "properties": {"x": {"type": "string", "readOnly": True}}}, "readOnly"),
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}, "$defs": {}},
            "unknown",
        ),
        (
            {
                "$ref": "#/$defs/Node",
                "$defs": {
                    "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}
                },
            },
            "recursive",
        ),
        ({"type": "array", "items": [{"type": "string"}]}, "tuple"),
    ],
)
def test_constructs_without_a_structural_form_fail_loudly(
    source: dict[str, Any], message: str
) -> None:
    with pytest.raises(SchemaError, match=message):
        to_structural(source)


# -- the checker catches what the API server refuses -------------------------------------------


def _root(**status: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"metadata": {"type": "object"}, "status": {"type": "object", **status}},
    }


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "nullable": True}, "nullable is not allowed"),
        ({"type": "array", "items": {"type": "string"}}, "type must be object"),
        (
            {"type": "object", "properties": {"metadata": {"type": "object", "properties": {}}}},
            "metadata",
        ),
        (_root(properties={"x": {"description": "untyped"}}), "node has no type"),
        (
            _root(properties={"x": {"type": "string", "x-kubernetes-int-or-string": True}}),
            "int-or-string",
        ),
        (
            _root(properties={"x": {"anyOf": [{"type": "string"}, {"type": "null"}]}}),
            "declares a type",
        ),
        (_root(properties={"x": {"$ref": "#/$defs/X"}}), "'$ref' is not allowed"),
        (
            _root(
                properties={
                    "x": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
                }
            ),
            "uniqueItems",
        ),
        (
            _root(properties={"x": {"type": "string"}}, additionalProperties={"type": "string"}),
            "exclusive",
        ),
        (_root(properties={"x": {"type": "array"}}), "one items schema"),
        (_root(properties={"x": {"type": "string"}}, required=["y"]), "not a property"),
        (
            _root(
                properties={
                    "rows": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"index": {"type": "integer"}}},
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["index"],
                    }
                }
            ),
            "must be required",
        ),
        (
            _root(
                properties={
                    "rows": {
                        "type": "array",
                        "items": {"type": "object", "properties": {}},
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["index"],
                    }
                }
            ),
            "not a property",
        ),
        (
            _root(
                properties={
                    "rows": {
                        "type": "array",
                        "items": {"type": "string"},
                        "x-kubernetes-list-map-keys": ["a"],
                    }
                }
            ),
            "without",
        ),
    ],
)
def test_checker_reports_violations(schema: dict[str, Any], problem: str) -> None:
    problems = structural_violations(schema)
    assert any(problem in p for p in problems), problems
