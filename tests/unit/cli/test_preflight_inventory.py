"""The inventory: no defaults, no unknown keys, strict types, each bad field named; exit 2."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.cli.preflight import run
from omed.cli.preflight_inventory import (
    InventoryError,
    YamlError,
    load_inventory,
    load_yaml,
    parse_inventory,
)

GOOD: dict[str, Any] = {
    "managerImage": "ome/ome-manager:v1.3.0",
    "omenativeStatus": {"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 20000},
    "manager": {
        "namespace": "ome",
        "deployment": "ome-controller-manager",
        "container": "manager",
        "configMap": "inferenceservice-config",
    },
    "pageSize": 500,
    "clusters": [
        {"name": "prod-east", "kubeconfig": "/etc/ome/kubeconfigs/prod-east", "context": "east"},
        {"name": "prod-west", "kubeconfig": "/etc/ome/kubeconfigs/prod-west", "context": "west"},
    ],
}

Edit = Callable[[dict[str, Any]], object]


def messages(edit: Edit) -> list[str]:
    document = copy.deepcopy(GOOD)
    edit(document)
    with pytest.raises(InventoryError) as caught:
        parse_inventory(document)
    return caught.value.messages


def test_the_pages_inventory_is_valid() -> None:
    inventory = parse_inventory(copy.deepcopy(GOOD))
    assert inventory.manager_image == "ome/ome-manager:v1.3.0"
    assert inventory.omenative_status.instance_status_encoding == "DenseV1"
    assert inventory.omenative_status.max_decoded_instances == 20000
    assert inventory.manager.config_map == "inferenceservice-config"
    assert inventory.page_size == 500
    assert [cluster.name for cluster in inventory.clusters] == ["prod-east", "prod-west"]
    assert inventory.cluster("prod-west") is inventory.clusters[1]
    assert inventory.cluster("prod-north") is None


def _pop(*path: str | int) -> Edit:
    def edit(document: dict[str, Any]) -> None:
        holder: Any = document
        for key in path[:-1]:
            holder = holder[key]
        holder.pop(path[-1])

    return edit


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        (("managerImage",), "managerImage"),
        (("omenativeStatus",), "omenativeStatus"),
        (("omenativeStatus", "instanceStatusEncoding"), "omenativeStatus.instanceStatusEncoding"),
        (("omenativeStatus", "maxDecodedInstances"), "omenativeStatus.maxDecodedInstances"),
        (("manager",), "manager"),
        (("manager", "namespace"), "manager.namespace"),
        (("manager", "deployment"), "manager.deployment"),
        (("manager", "container"), "manager.container"),
        (("manager", "configMap"), "manager.configMap"),
        (("pageSize",), "pageSize"),
        (("clusters",), "clusters"),
        (("clusters", 1, "name"), "clusters[1].name"),
        (("clusters", 0, "kubeconfig"), "clusters[0].kubeconfig"),
        (("clusters", 1, "context"), "clusters[1].context"),
    ],
)
def test_every_field_is_required(path: tuple[str | int, ...], shown: str) -> None:
    assert messages(_pop(*path)) == [f"{shown} is required"]


@pytest.mark.parametrize(
    ("where", "shown"),
    [
        ((), "managerimage"),
        (("omenativeStatus",), "omenativeStatus.managerimage"),
        (("manager",), "manager.managerimage"),
        (("clusters", 0), "clusters[0].managerimage"),
    ],
)
def test_unknown_fields_are_refused_at_every_level(
    where: tuple[str | int, ...], shown: str
) -> None:
    def edit(document: dict[str, Any]) -> None:
        holder: Any = document
        for key in where:
            holder = holder[key]
        holder["managerimage"] = "x"

    assert messages(edit) == [f"{shown} is not a known field"]


def test_a_misspelled_field_is_both_missing_and_unknown() -> None:
    def edit(document: dict[str, Any]) -> None:
        document["clusters"][0]["kubeConfig"] = document["clusters"][0].pop("kubeconfig")

    assert messages(edit) == [
        "clusters[0].kubeconfig is required",
        "clusters[0].kubeConfig is not a known field",
    ]


def test_python_names_are_not_aliases() -> None:
    def edit(document: dict[str, Any]) -> None:
        document["page_size"] = document.pop("pageSize")

    assert messages(edit) == ["pageSize is required", "page_size is not a known field"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("pageSize", "500", "pageSize must be an integer, got a string"),
        ("pageSize", 500.0, "pageSize must be an integer, got a number"),
        ("pageSize", True, "pageSize must be an integer, got a boolean"),
        ("pageSize", 0, "pageSize must be at least 1, got 0"),
        ("pageSize", None, "pageSize must be an integer, got null"),
        ("managerImage", 3, "managerImage must be a string, got an integer"),
        ("managerImage", "", "managerImage must not be empty"),
        ("manager", "ome", "manager must be a mapping, got a string"),
        ("clusters", {"name": "x"}, "clusters must be a list, got a mapping"),
        ("clusters", [], "clusters must list at least one cluster"),
        ("clusters", ["prod-east"], "clusters[0] must be a mapping, got a string"),
        ("omenativeStatus", "DenseV1", "omenativeStatus must be a mapping, got a string"),
    ],
)
def test_values_are_typed_strictly(key: str, value: Any, message: str) -> None:
    assert messages(lambda document: document.update({key: value})) == [message]


def test_empty_strings_in_nested_fields_are_refused() -> None:
    assert messages(lambda document: document["clusters"][1].update(context="")) == [
        "clusters[1].context must not be empty"
    ]
    assert messages(lambda document: document["manager"].update(namespace=7)) == [
        "manager.namespace must be a string, got an integer"
    ]


def test_duplicate_cluster_names_are_refused() -> None:
    def edit(document: dict[str, Any]) -> None:
        document["clusters"].append(dict(document["clusters"][0], context="other"))

    assert messages(edit) == ['clusters[2].name "prod-east" is already the name of clusters[0]']


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            {"instanceStatusEncoding": "Dense", "maxDecodedInstances": 20000},
            "validate omenativeStatus.instanceStatusEncoding: invalid "
            'omenativeStatus.instanceStatusEncoding "Dense" must be DenseV1 or ColumnarV2',
        ),
        (
            {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 0},
            "validate omenativeStatus.maxDecodedInstances: invalid "
            "omenativeStatus.maxDecodedInstances 0 must be a positive integer",
        ),
        (
            {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": None},
            "validate omenativeStatus.maxDecodedInstances: omenativeStatus.maxDecodedInstances "
            "is required when instanceStatusEncoding is ColumnarV2",
        ),
        (
            {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": "20000"},
            "validate omenativeStatus.maxDecodedInstances: invalid "
            'omenativeStatus.maxDecodedInstances "20000" must be a positive integer',
        ),
    ],
)
def test_the_block_is_checked_by_the_managers_rules(block: dict[str, Any], message: str) -> None:
    assert messages(lambda document: document.update(omenativeStatus=block)) == [message]


def test_a_dense_block_may_set_no_bound_but_must_say_so() -> None:
    document = copy.deepcopy(GOOD)
    document["omenativeStatus"]["maxDecodedInstances"] = None
    assert parse_inventory(document).omenative_status.max_decoded_instances is None


def test_all_problems_are_reported_at_once() -> None:
    def edit(document: dict[str, Any]) -> None:
        del document["pageSize"]
        document["manager"]["extra"] = 1

    assert messages(edit) == ["manager.extra is not a known field", "pageSize is required"]


def test_a_document_that_is_not_a_mapping() -> None:
    with pytest.raises(InventoryError) as caught:
        parse_inventory(None)
    assert caught.value.messages == ["the inventory is empty"]
    with pytest.raises(InventoryError) as caught:
        parse_inventory(["managerImage"])
    assert caught.value.messages == ["the inventory must be a mapping, got a list"]


# -- files -------------------------------------------------------------------------------------


def test_relative_kubeconfigs_are_relative_to_the_inventory(tmp_path: Path) -> None:
    document = copy.deepcopy(GOOD)
    document["clusters"][0]["kubeconfig"] = "kubeconfigs/east"
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(document))
    inventory = load_inventory(path)
    assert inventory.clusters[0].kubeconfig == str(tmp_path.resolve() / "kubeconfigs" / "east")
    assert inventory.clusters[1].kubeconfig == "/etc/ome/kubeconfigs/prod-west"


def test_yaml_keeps_timestamps_as_strings_and_refuses_duplicate_keys(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text("readySince: 2026-09-14T20:50:00Z\nday: 2026-09-14\n")
    assert load_yaml(path, what="replacement") == {
        "readySince": "2026-09-14T20:50:00Z",
        "day": "2026-09-14",
    }
    path.write_text("pageSize: 1\npageSize: 2\n")
    with pytest.raises(YamlError) as caught:
        load_yaml(path, what="inventory")
    assert str(caught.value) == (
        f"inventory {path} is not valid YAML: line 2, column 1: found the key 'pageSize' twice"
    )


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(YamlError) as caught:
        load_yaml(tmp_path / "missing.yaml", what="inventory")
    assert str(caught.value) == (
        f"cannot read inventory {tmp_path / 'missing.yaml'}: No such file or directory"
    )
    path = tmp_path / "bad.yaml"
    path.write_text("clusters: [\n")
    with pytest.raises(YamlError) as caught:
        load_yaml(path, what="inventory")
    assert str(caught.value).startswith(f"inventory {path} is not valid YAML: line 2, column 1: ")


# -- through the CLI: exit 2, one error line per problem ---------------------------------------


async def check(tmp_path: Path, document: Any) -> tuple[int, str, str]:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    out, err = io.StringIO(), io.StringIO()
    code = await run(["--inventory", str(path)], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_pop("pageSize"), "pageSize is required"),
        (_pop("manager", "configMap"), "manager.configMap is required"),
        (_pop("clusters", 0, "context"), "clusters[0].context is required"),
        (
            _pop("omenativeStatus", "maxDecodedInstances"),
            "omenativeStatus.maxDecodedInstances is required",
        ),
        (lambda d: d.update(dryRun=True), "dryRun is not a known field"),
        (
            lambda d: d["clusters"][1].update(namespace="x"),
            "clusters[1].namespace is not a known field",
        ),
        (lambda d: d.update(clusters=[]), "clusters must list at least one cluster"),
    ],
)
async def test_a_bad_inventory_exits_2_naming_the_field(
    tmp_path: Path, edit: Edit, message: str
) -> None:
    document = copy.deepcopy(GOOD)
    edit(document)
    code, out, err = await check(tmp_path, document)
    assert (code, out) == (2, "")
    assert err == f"error: inventory {tmp_path / 'fleet.yaml'}: {message}\n"


async def test_a_missing_inventory_file_exits_2(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run(["--inventory", str(tmp_path / "nope.yaml")], out=out, err=err)
    assert code == 2
    # The message names the file once.
    assert err.getvalue() == (
        f"error: cannot read inventory {tmp_path / 'nope.yaml'}: No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update({1: "x"}), "1 is not a known field"),
        (lambda d: d.update({None: "x"}), "null is not a known field"),
        (lambda d: d["manager"].update({2.5: "x"}), "manager.2.5 is not a known field"),
        (lambda d: d["clusters"][1].update({True: "x"}), "clusters[1].true is not a known field"),
        (lambda d: d["omenativeStatus"].update({7: 1}), "omenativeStatus.7 is not a known field"),
    ],
)
def test_keys_that_are_not_strings_are_unknown_fields(edit: Edit, message: str) -> None:
    assert messages(edit) == [message]


async def test_a_non_string_key_exits_2_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(copy.deepcopy(GOOD)) + "1: x\n")
    out, err = io.StringIO(), io.StringIO()
    assert await run(["--inventory", str(path)], out=out, err=err) == 2
    assert err.getvalue() == f"error: inventory {path}: 1 is not a known field\n"


@pytest.mark.parametrize(
    "text",
    [
        "clusters: " + "[" * 400 + "]" * 400 + "\n",  # past Python's recursion limit
        "clusters:\n" + "".join("  " * level + "- \n" for level in range(1, 40)),  # block style
        "clusters: " + "[" * 32 + "]" * 32 + "\n",  # 33 levels with the top mapping
    ],
)
def test_deeply_nested_yaml_is_refused_without_recursing(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(YamlError) as caught:
        load_yaml(path, what="inventory")
    assert str(caught.value) == f"inventory {path} is nested more than 32 levels deep"


def test_nesting_up_to_the_limit_and_shared_aliases_are_read(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("a: " + "[" * 31 + "]" * 31 + "\n")
    assert load_yaml(path, what="inventory") is not None
    # 9**8 paths through nodes shared by aliases: each node is walked once per depth
    levels = "".join(f"l{k + 1}: &n{k + 1} [{', '.join([f'*n{k}'] * 9)}]\n" for k in range(8))
    path.write_text("l0: &n0 [1, 2, 3]\n" + levels)
    assert len(load_yaml(path, what="inventory")["l8"]) == 9


async def test_a_deeply_nested_inventory_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("clusters: " + "[" * 400 + "]" * 400 + "\n")
    out, err = io.StringIO(), io.StringIO()
    assert await run(["--inventory", str(path)], out=out, err=err) == 2
    assert err.getvalue() == (f"error: inventory {path} is nested more than 32 levels deep\n")
