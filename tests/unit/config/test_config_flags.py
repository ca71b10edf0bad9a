"""Flags: Go's grammar and error lines, every flag's default and rules, leader timing."""

from __future__ import annotations

import io
import re

import pytest

from omed.config.flags import (
    FLAG_NAMES,
    FlagError,
    HelpRequested,
    LeaderElectionTimingError,
    Options,
    check_leader_election_timing,
    parse_flags,
    parse_flags_or_exit,
    usage,
)

# The grep operators run on the manager's log for flag errors.
TROUBLESHOOTING_GREP = re.compile(
    r'flag provided but not defined|invalid (boolean )?value ".*" for (flag )?-'
)


def parse(*argv: str, env: dict[str, str] | None = None) -> Options:
    return parse_flags(argv, env or {})


def error_of(*argv: str) -> FlagError:
    with pytest.raises(FlagError) as caught:
        parse(*argv)
    return caught.value


def test_defaults() -> None:
    options = parse()
    assert options == Options()
    assert options.metrics_bind_address == ":8080"
    assert options.health_probe_addr == ":8081"
    assert options.webhook is False
    assert options.webhook_port == 9443
    assert options.webhook_cert_dir == "/tmp/k8s-webhook-server/serving-certs"
    assert options.leader_elect is False
    assert options.leader_election_namespace == "ome"
    assert options.leader_elect_lease_duration == 15.0
    assert options.leader_elect_renew_deadline == 10.0
    assert options.leader_elect_retry_period == 2.0
    assert options.inferenceservice_max_concurrent_reconciles == 1
    assert options.inferencereplica_max_concurrent_reconciles == 1
    assert options.kube_api_qps == 20.0
    assert options.kube_api_burst == 30
    assert options.config_cache_ttl == 30.0
    assert options.accelerator_resources == ("nvidia.com/gpu",)
    assert options.runtime_revision_retention == 10
    assert options.runtime_revision_grace_period == 86400.0
    assert options.zap_encoder == "console"
    assert options.zap_log_level == "info"
    assert options.zap_devel is False
    assert options.kubeconfig is None
    assert options.set_flags == frozenset()


def test_environment_defaults() -> None:
    options = parse(env={"POD_NAMESPACE": "ome-system", "KUBECONFIG": "/etc/kube/config"})
    assert options.leader_election_namespace == "ome-system"
    assert options.kubeconfig == "/etc/kube/config"


def test_empty_environment_values_fall_back() -> None:
    options = parse(env={"POD_NAMESPACE": "", "KUBECONFIG": ""})
    assert options.leader_election_namespace == "ome"
    assert options.kubeconfig is None


def test_flag_overrides_environment() -> None:
    options = parse("--leader-election-namespace=other", env={"POD_NAMESPACE": "ome-system"})
    assert options.leader_election_namespace == "other"


@pytest.mark.parametrize(
    "argv",
    [
        ["--webhook-port=9444"],
        ["--webhook-port", "9444"],
        ["-webhook-port=9444"],
        ["-webhook-port", "9444"],
    ],
)
def test_value_flag_forms(argv: list[str]) -> None:
    options = parse(*argv)
    assert options.webhook_port == 9444
    assert options.set_flags == frozenset({"webhook-port"})


@pytest.mark.parametrize("argv", [["--leader-elect"], ["-leader-elect"]])
def test_bare_boolean_is_true(argv: list[str]) -> None:
    assert parse(*argv).leader_elect is True


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("t", True),
        ("T", True),
        ("TRUE", True),
        ("true", True),
        ("True", True),
        ("0", False),
        ("f", False),
        ("F", False),
        ("FALSE", False),
        ("false", False),
        ("False", False),
    ],
)
def test_boolean_values(value: str, expected: bool) -> None:
    assert parse(f"--leader-elect={value}").leader_elect is expected
    assert parse(f"-webhook={value}").webhook is expected
    assert parse(f"--zap-devel={value}").zap_devel is expected


def test_last_occurrence_wins() -> None:
    options = parse(
        "--zap-encoder=json",
        "--leader-elect",
        "--runtime-revision-retention=10",
        "--zap-encoder",
        "console",
        "--leader-elect=false",
        "-runtime-revision-retention=5",
    )
    assert options.zap_encoder == "console"
    assert options.leader_elect is False
    assert options.runtime_revision_retention == 5


def test_chart_arguments_from_the_product_page() -> None:
    options = parse(
        "--metrics-bind-address=:8080",
        "--leader-elect",
        "--webhook",
        "--zap-encoder=console",
        "--inferenceservice-max-concurrent-reconciles=8",
        "--inferencereplica-max-concurrent-reconciles=4",
        "--config-cache-ttl=30s",
        "--accelerator-resources=nvidia.com/gpu,google.com/tpu",
        "--kube-api-qps=100",
        "--kube-api-burst=200",
        "--leader-elect-lease-duration=60s",
        "--leader-elect-renew-deadline=40s",
        "--leader-elect-retry-period=8s",
        "--runtime-revision-retention=5",
        "--runtime-revision-grace-period=72h",
    )
    assert options.leader_elect is True
    assert options.webhook is True
    assert options.inferenceservice_max_concurrent_reconciles == 8
    assert options.inferencereplica_max_concurrent_reconciles == 4
    assert options.accelerator_resources == ("nvidia.com/gpu", "google.com/tpu")
    assert options.kube_api_qps == 100.0
    assert options.kube_api_burst == 200
    assert options.leader_elect_lease_duration == 60.0
    assert options.leader_elect_renew_deadline == 40.0
    assert options.leader_elect_retry_period == 8.0
    assert options.runtime_revision_retention == 5
    assert options.runtime_revision_grace_period == 72 * 3600.0
    check_leader_election_timing(options)


# --- the two error forms, exactly -------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--foo"], "flag provided but not defined: -foo"),
        (["-foo"], "flag provided but not defined: -foo"),
        (["--foo=bar"], "flag provided but not defined: -foo"),
        (
            ["--leader-elect", "--namespace-scope"],
            "flag provided but not defined: -namespace-scope",
        ),
    ],
)
def test_unknown_flag(argv: list[str], message: str) -> None:
    error = error_of(*argv)
    assert error.message == message
    assert error.exit_code == 2
    assert TROUBLESHOOTING_GREP.search(error.message)


@pytest.mark.parametrize("value", ["yes", "", "2", "on", "tRUE"])
def test_bad_boolean_value(value: str) -> None:
    error = error_of(f"--leader-elect={value}")
    assert error.message == f'invalid boolean value "{value}" for -leader-elect: parse error'
    assert error.exit_code == 2
    assert TROUBLESHOOTING_GREP.search(error.message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--webhook-port=x"], 'invalid value "x" for flag -webhook-port: parse error'),
        (["--webhook-port", "x"], 'invalid value "x" for flag -webhook-port: parse error'),
        (["--kube-api-burst=1e3"], 'invalid value "1e3" for flag -kube-api-burst: parse error'),
        (
            ["--kube-api-burst=99999999999999999999"],
            'invalid value "99999999999999999999" for flag -kube-api-burst: value out of range',
        ),
    ],
)
def test_bad_value(argv: list[str], message: str) -> None:
    error = error_of(*argv)
    assert error.message == message
    assert error.exit_code == 2
    assert TROUBLESHOOTING_GREP.search(error.message)


# --- grammar edges (Go's parseOne) ------------------------------------------------------------


def test_value_flag_takes_next_argument_even_with_a_dash() -> None:
    error = error_of("--zap-encoder", "--leader-elect")
    assert error.message == (
        'invalid value "--leader-elect" for flag -zap-encoder: '
        'invalid encoder value "--leader-elect"'
    )


def test_flag_needs_an_argument() -> None:
    assert error_of("--webhook-port").message == "flag needs an argument: -webhook-port"


@pytest.mark.parametrize("arg", ["---leader-elect", "-=x", "--=x"])
def test_bad_flag_syntax(arg: str) -> None:
    assert error_of(arg).message == f"bad flag syntax: {arg}"


def test_double_dash_ends_the_flags() -> None:
    assert parse("--leader-elect", "--").leader_elect is True


@pytest.mark.parametrize(
    ("argv", "stray"),
    [(["--leader-elect", "false"], "false"), (["manager"], "manager"), (["--", "-x"], "-x")],
)
def test_positional_argument_is_refused(argv: list[str], stray: str) -> None:
    error = error_of(*argv)
    assert error.message == (
        f'unexpected argument "{stray}": omed takes flags only; '
        "give a boolean flag its value as -name=value"
    )
    assert error.exit_code == 2


def test_equals_sign_in_value_is_kept() -> None:
    assert parse("--kubeconfig=/a=b").kubeconfig == "/a=b"


# --- per-flag values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("30s", 30.0), ("0", 0.0), ("0s", 0.0), ("1m30s", 90.0), ("1.5h", 5400.0), ("300ms", 0.3)],
)
def test_config_cache_ttl(value: str, seconds: float) -> None:
    assert parse(f"--config-cache-ttl={value}").config_cache_ttl == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("config-cache-ttl", "abc", 'time: invalid duration "abc"'),
        ("config-cache-ttl", "30", 'time: missing unit in duration "30"'),
        ("config-cache-ttl", "-1s", "must not be negative"),
        ("runtime-revision-grace-period", "3d", 'time: unknown unit "d" in duration "3d"'),
        ("runtime-revision-grace-period", "-1h", "must not be negative"),
        ("leader-elect-lease-duration", "1x", 'time: unknown unit "x" in duration "1x"'),
        ("webhook-port", "0", "must be between 1 and 65535"),
        ("webhook-port", "65536", "must be between 1 and 65535"),
        (
            "inferenceservice-max-concurrent-reconciles",
            "-1",
            "must be 0 or more (0 means one worker)",
        ),
        (
            "inferencereplica-max-concurrent-reconciles",
            "-1",
            "must be 0 or more (0 means one worker)",
        ),
        ("inferenceservice-max-concurrent-reconciles", "1025", "must be at most 1024"),
        ("inferencereplica-max-concurrent-reconciles", "40000000", "must be at most 1024"),
        ("kube-api-qps", "0", "must be a positive number"),
        ("kube-api-qps", "-5", "must be a positive number"),
        ("kube-api-qps", "NaN", "must be a positive number"),
        ("kube-api-qps", "fast", "parse error"),
        ("kube-api-burst", "0", "must be at least 1"),
        ("runtime-revision-retention", "-1", "must be 0 or more"),
        ("zap-encoder", "text", 'invalid encoder value "text"'),
        ("zap-log-level", "warn", 'invalid log level "warn"'),
        ("zap-log-level", "0", 'invalid log level "0"'),
        ("zap-log-level", "-2", 'invalid log level "-2"'),
        (
            "accelerator-resources",
            "nvidia com/gpu",
            '"nvidia com/gpu" is not a resource name, such as nvidia.com/gpu',
        ),
        (
            "metrics-bind-address",
            "8080",
            'want host:port, such as ":8080", or "0" to turn the server off',
        ),
        (
            "health-probe-addr",
            ":99999",
            'want host:port, such as ":8080", or "0" to turn the server off',
        ),
        (
            "leader-election-namespace",
            "Bad_NS",
            "must be a namespace name (lower-case letters, digits and '-')",
        ),
        ("webhook-cert-dir", "", "must not be empty"),
    ],
)
def test_value_rules(flag: str, value: str, why: str) -> None:
    error = error_of(f"--{flag}={value}")
    assert error.message == f'invalid value "{value}" for flag -{flag}: {why}'


@pytest.mark.parametrize(("value", "workers"), [("0", 1), ("1", 1), ("8", 8)])
def test_worker_counts(value: str, workers: int) -> None:
    options = parse(
        f"--inferenceservice-max-concurrent-reconciles={value}",
        f"--inferencereplica-max-concurrent-reconciles={value}",
    )
    assert options.inferenceservice_max_concurrent_reconciles == workers
    assert options.inferencereplica_max_concurrent_reconciles == workers


def test_rate_limit_values() -> None:
    options = parse("--kube-api-qps=1e2", "--kube-api-burst=0x100")
    assert options.kube_api_qps == 100.0
    assert options.kube_api_burst == 256


@pytest.mark.parametrize(
    ("value", "resources"),
    [
        ("nvidia.com/gpu, google.com/tpu ,", ("nvidia.com/gpu", "google.com/tpu")),
        ("", ()),
        ("amd.com/gpu", ("amd.com/gpu",)),
    ],
)
def test_accelerator_resources(value: str, resources: tuple[str, ...]) -> None:
    assert parse(f"--accelerator-resources={value}").accelerator_resources == resources


@pytest.mark.parametrize("value", ["0", "", ":8080", "0.0.0.0:8080", "[::]:9000", "localhost:0"])
def test_bind_addresses(value: str) -> None:
    options = parse(f"--metrics-bind-address={value}", f"--health-probe-addr={value}")
    assert options.metrics_bind_address == value
    assert options.health_probe_addr == value


@pytest.mark.parametrize(
    ("value", "level"),
    [("debug", "debug"), ("INFO", "info"), ("Error", "error"), ("panic", "panic"), ("3", 3)],
)
def test_zap_log_level(value: str, level: object) -> None:
    assert parse(f"--zap-log-level={value}").zap_log_level == level


def test_zap_devel_defaults_the_level_to_debug() -> None:
    assert parse("--zap-devel").zap_log_level == "debug"
    assert parse("--zap-devel", "--zap-log-level=error").zap_log_level == "error"
    assert parse("--zap-log-level=error", "--zap-devel").zap_log_level == "error"


def test_zap_encoder_json() -> None:
    assert parse("--zap-encoder=json").zap_encoder == "json"


def test_empty_kubeconfig_flag_means_in_cluster() -> None:
    assert parse("--kubeconfig=", env={"KUBECONFIG": "/x"}).kubeconfig is None


# --- help -------------------------------------------------------------------------------------


@pytest.mark.parametrize("arg", ["--help", "-help", "-h", "--h", "--help=x"])
def test_help_is_exit_zero(arg: str) -> None:
    with pytest.raises(HelpRequested) as caught:
        parse("--leader-elect", arg, "--unknown-after-help")
    assert caught.value.exit_code == 0
    assert caught.value.message == usage({})


def test_help_lists_every_flag_with_its_default() -> None:
    text = usage({"POD_NAMESPACE": "ome-system"})
    assert text.startswith("Usage of omed:\n")
    blocks = re.split(r"\n(?=  -)", text.split("\n", 1)[1])
    listed = {block.split()[0].lstrip("-"): block for block in blocks}
    assert sorted(listed) == sorted(FLAG_NAMES)
    for name, block in listed.items():
        assert "(default " in block, name
    expected_defaults = {
        "metrics-bind-address": '(default ":8080")',
        "health-probe-addr": '(default ":8081")',
        "webhook": "(default false)",
        "webhook-port": "(default 9443)",
        "webhook-cert-dir": '(default "/tmp/k8s-webhook-server/serving-certs")',
        "leader-elect": "(default false)",
        "leader-election-namespace": '(default "ome-system")',
        "leader-elect-lease-duration": "(default 15s)",
        "leader-elect-renew-deadline": "(default 10s)",
        "leader-elect-retry-period": "(default 2s)",
        "graceful-shutdown-timeout": "(default 25s)",
        "inferenceservice-max-concurrent-reconciles": "(default 1)",
        "inferencereplica-max-concurrent-reconciles": "(default 1)",
        "kube-api-qps": "(default 20)",
        "kube-api-burst": "(default 30)",
        "config-cache-ttl": "(default 30s)",
        "accelerator-resources": '(default "nvidia.com/gpu")',
        "runtime-revision-retention": "(default 10)",
        "runtime-revision-grace-period": "(default 24h0m0s)",
        "zap-encoder": '(default "console")',
        "zap-log-level": '(default "info")',
        "zap-devel": "(default false)",
        "kubeconfig": '(default "")',
    }
    assert set(expected_defaults) == set(FLAG_NAMES)
    for name, default in expected_defaults.items():
        assert listed[name].rstrip().endswith(default), (name, listed[name])


def test_help_shows_types_like_go() -> None:
    text = usage({})
    assert "\n  -config-cache-ttl duration\n" in text
    assert "\n  -webhook-port int\n" in text
    assert "\n  -kube-api-qps float\n" in text
    assert "\n  -zap-encoder string\n" in text
    assert "\n  -leader-elect\n" in text


def test_flag_names() -> None:
    assert len(FLAG_NAMES) == 23
    assert "kubeconfig" in FLAG_NAMES


# --- the main wrapper -------------------------------------------------------------------------


def test_wrapper_returns_options() -> None:
    options = parse_flags_or_exit(["--webhook"], {})
    assert options.webhook is True


def test_wrapper_prints_error_and_usage_and_exits_2() -> None:
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as caught:
        parse_flags_or_exit(["--foo"], {}, stdout=out, stderr=err)
    assert caught.value.code == 2
    assert err.getvalue() == "flag provided but not defined: -foo\n" + usage({})
    assert out.getvalue() == ""


def test_wrapper_prints_help_and_exits_0() -> None:
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as caught:
        parse_flags_or_exit(["-h"], {}, stdout=out, stderr=err)
    assert caught.value.code == 0
    assert out.getvalue() == usage({})
    assert err.getvalue() == ""


# --- leader election timing -------------------------------------------------------------------


def timing(lease: str, renew: str, retry: str) -> Options:
    return parse(
        f"--leader-elect-lease-duration={lease}",
        f"--leader-elect-renew-deadline={renew}",
        f"--leader-elect-retry-period={retry}",
    )


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [("15s", "10s", "2s"), ("60s", "40s", "8s"), ("90s", "60s", "12s"), ("11s", "10s", "8.3s")],
)
def test_timing_accepted(lease: str, renew: str, retry: str) -> None:
    assert check_leader_election_timing(timing(lease, renew, retry)) is None


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "message"),
    [
        (
            "10s",
            "10s",
            "2s",
            "--leader-elect-lease-duration=10s must be greater than "
            "--leader-elect-renew-deadline=10s",
        ),
        (
            "15s",
            "20s",
            "2s",
            "--leader-elect-lease-duration=15s must be greater than "
            "--leader-elect-renew-deadline=20s",
        ),
        (
            "60s",
            "12s",
            "10s",
            "--leader-elect-renew-deadline=12s must be greater than 1.2 x "
            "--leader-elect-retry-period=10s (12s)",
        ),
        ("0s", "-1s", "-2s", "--leader-elect-lease-duration=0s must be greater than zero"),
        ("15s", "10s", "0s", "--leader-elect-retry-period=0s must be greater than zero"),
        ("15s", "-1s", "2s", "--leader-elect-renew-deadline=-1s must be greater than zero"),
    ],
)
def test_timing_refused(lease: str, renew: str, retry: str, message: str) -> None:
    with pytest.raises(LeaderElectionTimingError) as caught:
        check_leader_election_timing(timing(lease, renew, retry))
    assert str(caught.value) == message
