"""omed.api.shapecheck: a model's parse checked without its instances must accept exactly
what the model accepts (but for the model validators the caller stands in for)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_samples import ISVC
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from omed.api.component import RuntimeComponentConfig
from omed.api.inferenceservice import InferenceServiceSpec
from omed.api.shapecheck import shape_checker

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = yaml.safe_load((ROOT / "examples" / "inferenceservice.yaml").read_text())["spec"]
BASES = [ISVC["spec"], EXAMPLE]  # every field set, and the demo's example

CHECK = shape_checker(InferenceServiceSpec, dropped=(RuntimeComponentConfig._replica_bounds,))
REPLICA_BOUNDS = "must not be less than minReplicas"


def model_verdict(spec: Any) -> bool | None:
    """True when the model parses ``spec``; None when only the dropped validator refuses it."""
    try:
        InferenceServiceSpec.model_validate(spec)
    except ValidationError as exc:
        if all(REPLICA_BOUNDS in error["msg"] for error in exc.errors()):
            return None
        return False
    return True


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (keys and list positions)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += paths(item, (*prefix, index))
    return out


KEYS = sorted(
    {str(part) for base in BASES for path in paths(base) for part in path}
    | {
        "min_replicas",
        "max_replicas",
        "instance_ready_timeout",
        "update_retry",
        "containers",
        "volumes",
        "annotations",
        "worker",
        "leader",
        "size",
        "kind",
        "name",
        "partition",
    }
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False)
    | st.sampled_from(
        [
            "",
            "15m",
            "0",
            "10%",
            "101%",
            "-1",
            "9999999h",
            "Auto",
            "Never",
            "None",
            "AllPodReady",
            "InPlaceOnly",
            "Update",
            "BaseModel",
            "x y",
        ]
    )
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS), children, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def specs(draw: st.DrawFn) -> Any:
    spec = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        targets = paths(spec)
        path = draw(st.sampled_from(targets))
        if not path:
            return draw(JSON) if draw(st.booleans()) else spec
        holder = spec
        for part in path[:-1]:
            holder = holder[part]
        action = draw(st.sampled_from(["set", "delete", "add"]))
        if action == "set":
            holder[path[-1]] = draw(JSON)
        elif action == "delete":
            del holder[path[-1]]
        elif isinstance(holder, dict):
            holder[draw(st.sampled_from(KEYS))] = draw(JSON)
    return spec


@settings(max_examples=1500, deadline=None)
@given(specs())
def test_the_check_accepts_exactly_what_the_model_parses(spec: Any) -> None:
    verdict = model_verdict(spec)
    if verdict is None:  # only the replica bounds refuse it: the check leaves them out
        assert CHECK(spec)
    else:
        assert CHECK(spec) is verdict


@pytest.mark.parametrize("base", BASES)
def test_the_bases_parse(base: dict[str, Any]) -> None:
    assert model_verdict(base) is True
    assert CHECK(base)


def test_a_model_validator_nobody_stands_in_for_is_refused_at_build() -> None:
    class Inner(BaseModel):
        low: int = 0

        @model_validator(mode="after")
        def _ordered(self) -> Inner:
            return self

    class Outer(BaseModel):
        inner: Inner | None = None

    with pytest.raises(ValueError, match=r"model validators nobody stands in for: .*_ordered"):
        shape_checker(Outer)
    assert shape_checker(Outer, dropped=(Inner._ordered,))({"inner": {"low": 1}})


def test_models_that_read_names_differently_are_refused_at_build() -> None:
    class ByAlias(BaseModel):
        model_config = {"populate_by_name": False, "alias_generator": str.upper}
        value: int = 0

    class Outer(BaseModel):
        model_config = {"populate_by_name": True, "alias_generator": str.upper}
        inner: ByAlias | None = None

    with pytest.raises(ValueError, match="don't agree on names, aliases and strictness"):
        shape_checker(Outer)


def test_models_that_differ_in_strictness_are_refused_at_build() -> None:
    class Strict(BaseModel):
        model_config = {"strict": True}
        value: int = 0

    class Outer(BaseModel):
        inner: Strict | None = None

    with pytest.raises(ValueError, match="don't agree on names, aliases and strictness"):
        shape_checker(Outer)


def test_a_default_the_model_validates_is_refused_at_build() -> None:
    """The check never makes defaults, so it can't stand in for a model that validates one."""

    class Checked(BaseModel):
        value: int = Field(default=0, validate_default=True)

    with pytest.raises(ValueError, match="'value' validates its default"):
        shape_checker(Checked)


def test_a_field_validator_that_takes_info_is_refused_at_build() -> None:
    """Without instances, ``info.data`` could differ: such a validator can't be checked."""

    class Ordered(BaseModel):
        low: int = 0
        high: int = 0

        @field_validator("high")
        @classmethod
        def _above(cls, value: int, info: ValidationInfo) -> int:
            if value < info.data.get("low", 0):
                raise ValueError("below low")
            return value

    with pytest.raises(ValueError, match="takes ValidationInfo"):
        shape_checker(Ordered)


def test_missing_fields_with_defaults_and_names_or_aliases_read_as_the_model_reads_them() -> None:
    class Inner(BaseModel):
        model_config = {"populate_by_name": True, "alias_generator": str.upper}
        count: int = 0
        items: list[int] = Field(default_factory=list)

    class Outer(BaseModel):
        model_config = {"populate_by_name": True, "alias_generator": str.upper}
        inner: Inner
        label: str = "x"

    check = shape_checker(Outer)
    for value in (
        {"INNER": {}},
        {"inner": {"count": 2}},
        {"INNER": {"COUNT": 2, "items": [1]}},
        {"inner": {"count": "two"}},
        {"INNER": {"ITEMS": ["a"]}},
        {"label": "y"},
        {"INNER": None},
    ):
        try:
            Outer.model_validate(value)
        except ValidationError:
            expected = False
        else:
            expected = True
        assert check(value) is expected, value
