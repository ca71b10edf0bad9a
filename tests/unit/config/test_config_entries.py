"""Startup entries of inferenceservice-config: every rule and its exact message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from omed.config.entries import (
    CLIENT_GO_EVENT_BURST,
    CLIENT_GO_EVENT_REFILL_INTERVAL,
    STARTUP_ENTRY_NAMES,
    Percent,
    StartupConfig,
    StartupConfigError,
    load_startup_config,
    resolve_budget,
)

OMENATIVE = json.dumps({"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 20000})
ABSENT = object()


def load(**entries: Any) -> StartupConfig:
    data = {"omenativeStatus": OMENATIVE}
    for key, value in entries.items():
        data[key] = value if isinstance(value, str) else json.dumps(value)
    return load_startup_config(data)


def failure(**entries: Any) -> StartupConfigError:
    with pytest.raises(StartupConfigError) as caught:
        load(**entries)
    return caught.value


def test_minimal_configmap() -> None:
    config = load_startup_config({"omenativeStatus": OMENATIVE})
    assert config.omenative_status.instance_status_encoding == "ColumnarV2"
    assert config.omenative_status.max_decoded_instances == 20000
    assert config.event_recorder.burst_size == CLIENT_GO_EVENT_BURST
    assert config.event_recorder.refill_interval == CLIENT_GO_EVENT_REFILL_INTERVAL
    assert config.lifecycle_scale.scale_up_pod_batch_size is None
    assert config.lifecycle_scale.scale_down_pod_batch_size is None
    assert config.lifecycle_scale.scale_down_requeue_interval is None
    assert config.lifecycle_scale.repair_batch_size is None
    assert config.enable_gateway_api is False
    assert config.ome_agent is None
    assert config.multicluster is None
    assert config.tpu_slice_provisioning is None


def test_the_error_is_split_for_logging() -> None:
    error = failure(lifecycle={"scaleDownPodBatchSize": "101%"})
    assert error.name == "lifecycle scale"
    assert error.message == "Failed to initialize lifecycle scale configuration"
    assert error.error == (
        "validate lifecycle.scaleDownPodBatchSize: invalid lifecycle.scaleDownPodBatchSize "
        '"101%" must be between 1% and 100%'
    )
    assert str(error) == f"{error.message}: {error.error}"


def test_every_startup_name_matches_the_troubleshooting_grep() -> None:
    import re

    grep = re.compile(r"Failed to initialize [a-zA-Z -]+ configuration")
    for name in STARTUP_ENTRY_NAMES.values():
        assert grep.fullmatch(StartupConfigError(name, "x").message), name


# --- lifecycle batch sizes --------------------------------------------------------------------

BATCH_FIELDS = [
    ("scaleUpPodBatchSize", "scale_up_pod_batch_size"),
    ("scaleDownPodBatchSize", "scale_down_pod_batch_size"),
    ("repairBatchSize", "repair_batch_size"),
]
POD_COUNT_FORM = (
    'must be a pod count (an integer of at least 1) or a percentage string such as "10%"'
)
PERCENT_FORM = (
    'must be a percentage of digits and %, from "1%" to "100%", with no sign, spaces or decimals'
)


@pytest.mark.parametrize(("key", "attr"), BATCH_FIELDS)
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (50, 50),
        (100, 100),
        (100000, 100000),
        ("1%", Percent(1)),
        ("10%", Percent(10)),
        ("100%", Percent(100)),
        ("010%", Percent(10)),
        (None, None),
        (ABSENT, None),
    ],
)
def test_batch_size_accepted(key: str, attr: str, value: object, expected: object) -> None:
    entry = {} if value is ABSENT else {key: value}
    scale = load(lifecycle=entry).lifecycle_scale
    assert getattr(scale, attr) == expected


@pytest.mark.parametrize(("key", "attr"), BATCH_FIELDS)
@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (0, "0 must be at least 1"),
        (-1, "-1 must be at least 1"),
        (
            True,
            f"true {POD_COUNT_FORM}",
        ),
        (
            False,
            f"false {POD_COUNT_FORM}",
        ),
        (
            1.5,
            f"1.5 {POD_COUNT_FORM}",
        ),
        (
            5.0,
            f"5.0 {POD_COUNT_FORM}",
        ),
        (
            {"count": 5},
            '{"count":5} must be a pod count (an integer of at least 1) or a percentage string '
            'such as "10%"',
        ),
        ("101%", '"101%" must be between 1% and 100%'),
        ("0%", '"0%" must be between 1% and 100%'),
        ("+5%", f'"+5%" {PERCENT_FORM}'),
        ("-5%", f'"-5%" {PERCENT_FORM}'),
        (" 5%", f'" 5%" {PERCENT_FORM}'),
        ("5 %", f'"5 %" {PERCENT_FORM}'),
        ("5.5%", f'"5.5%" {PERCENT_FORM}'),
        ("%", f'"%" {PERCENT_FORM}'),
        ("", f'"" {PERCENT_FORM}'),
        ("ten%", f'"ten%" {PERCENT_FORM}'),
        ("100", f'"100" {PERCENT_FORM}; write a pod count as a JSON number, such as 100'),
        ("5", f'"5" {PERCENT_FORM}; write a pod count as a JSON number, such as 5'),
    ],
)
def test_batch_size_refused(key: str, attr: str, value: object, detail: str) -> None:
    del attr
    error = failure(lifecycle={key: value})
    assert error.message == "Failed to initialize lifecycle scale configuration"
    assert error.error == f"validate lifecycle.{key}: invalid lifecycle.{key} {detail}"


def test_page_example_is_exact() -> None:
    error = failure(lifecycle={"scaleDownPodBatchSize": "101%"})
    assert str(error) == (
        "Failed to initialize lifecycle scale configuration: validate "
        'lifecycle.scaleDownPodBatchSize: invalid lifecycle.scaleDownPodBatchSize "101%" must '
        "be between 1% and 100%"
    )


# --- lifecycle interval ----------------------------------------------------------------------

INTERVAL = "lifecycle.scaleDownRequeueInterval"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("5s", 5.0), ("1m30s", 90.0), ("250ms", 0.25), (None, None), (ABSENT, None)],
)
def test_interval_accepted(value: object, seconds: float | None) -> None:
    entry = {} if value is ABSENT else {"scaleDownRequeueInterval": value}
    assert load(lifecycle=entry).lifecycle_scale.scale_down_requeue_interval == seconds


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("0s", '"0s" must be a positive duration, such as "5s"'),
        ("0", '"0" must be a positive duration, such as "5s"'),
        ("-1s", '"-1s" must be a positive duration, such as "5s"'),
        ("abc", '"abc" must be a positive duration, such as "5s": time: invalid duration "abc"'),
        ("5", '"5" must be a positive duration, such as "5s": time: missing unit in duration "5"'),
        (5, '5 must be a duration string, such as "5s"'),
        (True, 'true must be a duration string, such as "5s"'),
    ],
)
def test_interval_refused(value: object, detail: str) -> None:
    error = failure(lifecycle={"scaleDownRequeueInterval": value})
    assert error.message == "Failed to initialize lifecycle scale configuration"
    assert error.error == f"validate {INTERVAL}: invalid {INTERVAL} {detail}"


def test_every_bad_lifecycle_field_is_reported() -> None:
    error = failure(lifecycle={"scaleUpPodBatchSize": 0, "scaleDownRequeueInterval": "0s"})
    assert error.error == (
        "validate lifecycle.scaleUpPodBatchSize: invalid lifecycle.scaleUpPodBatchSize 0 must "
        "be at least 1; validate lifecycle.scaleDownRequeueInterval: invalid "
        'lifecycle.scaleDownRequeueInterval "0s" must be a positive duration, such as "5s"'
    )


def test_page_example_entry() -> None:
    scale = load(
        lifecycle={
            "scaleUpPodBatchSize": 50,
            "scaleDownPodBatchSize": "10%",
            "scaleDownRequeueInterval": "5s",
            "instanceReadyTimeout": "not read at startup",
            "audit": "not read at startup either",
            "someFutureSetting": {"x": 1},
        }
    ).lifecycle_scale
    assert scale.scale_up_pod_batch_size == 50
    assert scale.scale_down_pod_batch_size == Percent(10)
    assert scale.scale_down_requeue_interval == 5.0


# --- omenativeStatus --------------------------------------------------------------------------

STATUS_FAILURE = "Failed to initialize OMENative status configuration"
COLUMNAR_WITHOUT_BOUND = {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": None}
LOWERCASE_ENCODING = {"instanceStatusEncoding": "columnarv2", "maxDecodedInstances": 5}


@pytest.mark.parametrize(
    ("block", "encoding", "bound"),
    [
        (
            {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 20000},
            "ColumnarV2",
            20000,
        ),
        ({"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": 20000}, "DenseV1", 20000),
        ({"instanceStatusEncoding": "DenseV1"}, "DenseV1", 0),
        ({"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": None}, "DenseV1", 0),
        (
            {"instanceStatusEncoding": "ColumnarV2", "maxDecodedInstances": 1, "x": 1},
            "ColumnarV2",
            1,
        ),
    ],
)
def test_omenative_status_accepted(block: dict[str, object], encoding: str, bound: int) -> None:
    status = load(omenativeStatus=block).omenative_status
    assert status.instance_status_encoding == encoding
    assert status.decode_bound == bound


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({}, "ConfigMap inferenceservice-config has no omenativeStatus entry"),
        (
            {"omenativeStatus": "{"},
            "parse omenativeStatus: invalid JSON: unexpected end of data: line 1 column 2 (char 1)",
        ),
        ({"omenativeStatus": "[]"}, "parse omenativeStatus: want a JSON object, got array"),
        ({"omenativeStatus": "null"}, "parse omenativeStatus: want a JSON object, got null"),
        (
            {"omenativeStatus": "{}"},
            "validate omenativeStatus.instanceStatusEncoding: "
            "omenativeStatus.instanceStatusEncoding is required",
        ),
        (
            {"omenativeStatus": '{"instanceStatusEncoding": "ColumnarV2"}'},
            "validate omenativeStatus.maxDecodedInstances: omenativeStatus.maxDecodedInstances "
            "is required when instanceStatusEncoding is ColumnarV2",
        ),
        (
            {"omenativeStatus": json.dumps(COLUMNAR_WITHOUT_BOUND)},
            "validate omenativeStatus.maxDecodedInstances: omenativeStatus.maxDecodedInstances "
            "is required when instanceStatusEncoding is ColumnarV2",
        ),
        (
            {"omenativeStatus": json.dumps(LOWERCASE_ENCODING)},
            "validate omenativeStatus.instanceStatusEncoding: invalid "
            'omenativeStatus.instanceStatusEncoding "columnarv2" must be DenseV1 or ColumnarV2',
        ),
        (
            {"omenativeStatus": '{"instanceStatusEncoding": null}'},
            "validate omenativeStatus.instanceStatusEncoding: invalid "
            "omenativeStatus.instanceStatusEncoding null must be DenseV1 or ColumnarV2",
        ),
    ],
)
def test_omenative_status_refused(data: dict[str, str], error: str) -> None:
    with pytest.raises(StartupConfigError) as caught:
        load_startup_config(data)
    assert caught.value.message == STATUS_FAILURE
    assert caught.value.error == error


@pytest.mark.parametrize(
    ("bound", "shown"),
    [
        (0, "0"),
        (-1, "-1"),
        (1.5, "1.5"),
        (True, "true"),
        ("20000", '"20000"'),
        # Beyond Go's int, which upstream's json.Unmarshal refuses: not accepted either.
        (2**63, "9223372036854775808"),
        (2**64 - 1, "18446744073709551615"),
    ],
)
def test_omenative_status_bound_must_be_positive_integer(bound: object, shown: str) -> None:
    # (The block arrives as JSON text in the ConfigMap: failure() encodes it, as kubectl would.)
    error = failure(
        omenativeStatus={"instanceStatusEncoding": "DenseV1", "maxDecodedInstances": bound}
    )
    assert error.message == STATUS_FAILURE
    assert error.error == (
        "validate omenativeStatus.maxDecodedInstances: invalid "
        f"omenativeStatus.maxDecodedInstances {shown} must be a positive integer"
    )


# --- eventRecorder ----------------------------------------------------------------------------

RECORDER_FAILURE = "Failed to initialize event recorder configuration"


@pytest.mark.parametrize(
    ("entry", "burst", "refill"),
    [
        (ABSENT, 25, 300.0),
        ({}, 25, 300.0),
        ({"burstSize": 400, "refillInterval": "5s"}, 400, 5.0),
        ({"burstSize": 800, "refillInterval": "2s"}, 800, 2.0),
        ({"burstSize": None, "refillInterval": "2s"}, 25, 2.0),
        ({"burstSize": 800, "refillInterval": None}, 800, 300.0),
        ({"burstSize": 800}, 800, 300.0),
        ({"refillInterval": "1m"}, 25, 60.0),
    ],
)
def test_event_recorder_accepted(entry: object, burst: int, refill: float) -> None:
    config = load() if entry is ABSENT else load(eventRecorder=entry)
    assert config.event_recorder.burst_size == burst
    assert config.event_recorder.refill_interval == refill


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        (
            {"burstSize": 0},
            "validate eventRecorder.burstSize: invalid eventRecorder.burstSize 0 must be a "
            "positive integer",
        ),
        (
            {"burstSize": -3},
            "validate eventRecorder.burstSize: invalid eventRecorder.burstSize -3 must be a "
            "positive integer",
        ),
        (
            {"burstSize": "400"},
            'validate eventRecorder.burstSize: invalid eventRecorder.burstSize "400" must be a '
            "positive integer",
        ),
        (
            {"refillInterval": "0s"},
            'validate eventRecorder.refillInterval: invalid eventRecorder.refillInterval "0s" '
            'must be a positive duration, such as "2s"',
        ),
        (
            {"refillInterval": "-2s"},
            'validate eventRecorder.refillInterval: invalid eventRecorder.refillInterval "-2s" '
            'must be a positive duration, such as "2s"',
        ),
        (
            {"refillInterval": "soon"},
            'validate eventRecorder.refillInterval: invalid eventRecorder.refillInterval "soon" '
            'must be a positive duration, such as "2s": time: invalid duration "soon"',
        ),
        (
            {"refillInterval": 5},
            "validate eventRecorder.refillInterval: invalid eventRecorder.refillInterval 5 must "
            'be a duration string, such as "2s"',
        ),
        ('{"burstSize": 1,', "parse eventRecorder: invalid JSON: "),
        ("7", "parse eventRecorder: want a JSON object, got number"),
    ],
)
def test_event_recorder_refused(entry: object, error: str) -> None:
    caught = failure(eventRecorder=entry)
    assert caught.message == RECORDER_FAILURE
    if error.endswith(": "):
        assert caught.error.startswith(error)
    else:
        assert caught.error == error


# --- ingress.enableGatewayAPI and the free-form entries ----------------------------------------


@pytest.mark.parametrize(
    ("entry", "enabled"),
    [
        (ABSENT, False),
        ({}, False),
        ({"enableGatewayAPI": True}, True),
        ({"enableGatewayAPI": None}, False),
    ],
)
def test_enable_gateway_api(entry: object, enabled: bool) -> None:
    config = load() if entry is ABSENT else load(ingress=entry)
    assert config.enable_gateway_api is enabled


def test_enable_gateway_api_must_be_boolean() -> None:
    error = failure(ingress={"enableGatewayAPI": "true", "ingressDomain": 5})
    assert error.message == "Failed to initialize ingress configuration"
    # Only the startup field is checked here; ingressDomain is a reconcile-time setting.
    assert error.error == (
        'validate ingress.enableGatewayAPI: invalid ingress.enableGatewayAPI "true" must be '
        "true or false"
    )


@pytest.mark.parametrize(
    ("key", "name", "attr"),
    [
        ("omeAgent", "OME agent", "ome_agent"),
        ("multicluster", "multicluster", "multicluster"),
        ("tpuSliceProvisioning", "TPU slice provisioning", "tpu_slice_provisioning"),
    ],
)
def test_free_form_entries(key: str, name: str, attr: str) -> None:
    config = load(**{key: {"image": "agent:v1", "nested": {"a": [1, 2]}}})
    assert getattr(config, attr) == {"image": "agent:v1", "nested": {"a": [1, 2]}}
    with pytest.raises(StartupConfigError) as caught:
        load(**{key: "[1, 2]"})
    assert caught.value.message == f"Failed to initialize {name} configuration"
    assert caught.value.error == f"parse {key}: want a JSON object, got array"


@pytest.mark.parametrize("key", list(STARTUP_ENTRY_NAMES))
def test_malformed_json_names_the_entry(key: str) -> None:
    data = {"omenativeStatus": OMENATIVE, key: '{"unterminated": '}
    with pytest.raises(StartupConfigError) as caught:
        load_startup_config(data)
    assert caught.value.message == f"Failed to initialize {STARTUP_ENTRY_NAMES[key]} configuration"
    assert caught.value.error.startswith(f"parse {key}: invalid JSON: ")


def test_nan_is_not_json() -> None:
    error = failure(eventRecorder='{"burstSize": NaN}')
    assert error.error.startswith("parse eventRecorder: invalid JSON: ")


def test_reconcile_time_entries_do_not_block_startup() -> None:
    config = load(deploy="{not json", lifecycle={"audit": 5, "instanceReadyTimeout": 0})
    assert config.lifecycle_scale.scale_up_pod_batch_size is None


def test_first_bad_entry_in_check_order_is_reported() -> None:
    error = failure(lifecycle={"scaleUpPodBatchSize": 0}, eventRecorder={"burstSize": 0})
    assert error.name == "event recorder"


# --- budgets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "footprint", "budget"),
    [
        (None, 100, None),
        (5, 100, 5),
        (5, 2, 5),
        (Percent(10), 100, 10),
        (Percent(10), 101, 11),
        (Percent(10), 5, 1),
        (Percent(10), 0, 1),
        (Percent(100), 7, 7),
        (Percent(1), 1000, 10),
        (Percent(33), 10, 4),
    ],
)
def test_resolve_budget(
    configured: int | Percent | None, footprint: int, budget: int | None
) -> None:
    assert resolve_budget(configured, footprint) == budget


def test_percent_bounds() -> None:
    assert str(Percent(10)) == "10%"
    with pytest.raises(ValueError, match=r"outside 1\.\.100"):
        Percent(0)
    with pytest.raises(ValueError, match=r"outside 1\.\.100"):
        Percent(101)
