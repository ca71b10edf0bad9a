"""Go's token grammar in front of argparse: the edges a manifest can reach.

The grammar cases are what Go's ``flag.FlagSet.Parse`` does with the same command line.
omed's own additions are the refusal of a positional argument, the value rules, and the
check of defaults taken from the environment.
"""

from __future__ import annotations

import pytest

from omed.config.flags import FlagError, HelpRequested, Options, parse_flags


def parse(*argv: str, env: dict[str, str] | None = None) -> Options:
    return parse_flags(argv, env or {})


def message_of(*argv: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(FlagError) as caught:
        parse(*argv, env=env)
    assert caught.value.exit_code == 2
    return caught.value.message


# --- values that start with a dash --------------------------------------------------------


@pytest.mark.parametrize("value", ["-x", "--x", "-", "--", "-h", "--help", "--leader-elect"])
def test_a_value_starting_with_a_dash_is_the_next_argument(value: str) -> None:
    options = parse("--kubeconfig", value, "-webhook-cert-dir", value)
    assert options.kubeconfig == value
    assert options.webhook_cert_dir == value
    assert options.set_flags == frozenset({"kubeconfig", "webhook-cert-dir"})


@pytest.mark.parametrize("value", ["-x", "--", "-=-"])
def test_a_value_starting_with_a_dash_after_equals(value: str) -> None:
    assert parse(f"--kubeconfig={value}").kubeconfig == value


def test_a_negative_number_is_a_value_and_meets_the_flag_s_rule() -> None:
    assert message_of("--kube-api-qps", "-1") == (
        'invalid value "-1" for flag -kube-api-qps: must be a positive number'
    )
    assert message_of("--zap-encoder", "-x") == (
        'invalid value "-x" for flag -zap-encoder: invalid encoder value "-x"'
    )


def test_a_boolean_never_takes_the_next_argument() -> None:
    assert message_of("--webhook", "-1") == "flag provided but not defined: -1"


# --- repeated flags -----------------------------------------------------------------------


def test_a_repeated_flag_keeps_the_last_value() -> None:
    options = parse(
        "--kube-api-qps=5",
        "-kube-api-qps",
        "50",
        "--kube-api-qps=500",
        "--webhook",
        "--webhook=false",
        "--leader-elect=false",
        "-leader-elect",
    )
    assert options.kube_api_qps == 500.0
    assert options.webhook is False
    assert options.leader_elect is True
    assert options.set_flags == frozenset({"kube-api-qps", "webhook", "leader-elect"})


def test_every_occurrence_is_checked_even_when_a_later_one_wins() -> None:
    # Go sets each occurrence as it reads it, so a bad early value stops the parse.
    assert message_of("--webhook-port=x", "--webhook-port=9444") == (
        'invalid value "x" for flag -webhook-port: parse error'
    )
    assert message_of("--webhook-port=9444", "--webhook-port=x") == (
        'invalid value "x" for flag -webhook-port: parse error'
    )


# --- no prefix expansion, exact names -----------------------------------------------------


@pytest.mark.parametrize(
    "arg", ["--leader", "--leader-elec", "--webh=1", "--kube-api-q=5", "--Webhook", "--help-me"]
)
def test_no_prefix_expansion_and_no_case_folding(arg: str) -> None:
    name = arg.lstrip("-").partition("=")[0]
    assert message_of(arg) == f"flag provided but not defined: -{name}"


# --- which error Go reports first ---------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--webhook-port=x", "--bogus"], 'invalid value "x" for flag -webhook-port: parse error'),
        (["--bogus", "--webhook-port=x"], "flag provided but not defined: -bogus"),
        (
            ["--leader-elect=yes", "stray"],
            'invalid boolean value "yes" for -leader-elect: parse error',
        ),
        (
            ["stray", "--leader-elect=yes"],
            'unexpected argument "stray": omed takes flags only; '
            "give a boolean flag its value as -name=value",
        ),
        (
            ["--webhook-port=x", "--zap-encoder"],
            'invalid value "x" for flag -webhook-port: parse error',
        ),
        (["--webhook-port=x", "-h"], 'invalid value "x" for flag -webhook-port: parse error'),
        (["--bogus", "-h"], "flag provided but not defined: -bogus"),
    ],
)
def test_the_first_refused_argument_decides_the_line(argv: list[str], message: str) -> None:
    assert message_of(*argv) == message


@pytest.mark.parametrize(
    "argv", [["-h", "--webhook-port=x"], ["-h", "--bogus"], ["-h=1", "stray"], ["--webhook", "-h"]]
)
def test_help_stops_the_parse_where_it_stands(argv: list[str]) -> None:
    with pytest.raises(HelpRequested) as caught:
        parse(*argv)
    assert caught.value.exit_code == 0


# --- defaults -----------------------------------------------------------------------------


def test_a_default_from_the_environment_meets_the_flag_s_rule() -> None:
    assert message_of(env={"POD_NAMESPACE": "Bad_NS"}) == (
        'invalid value "Bad_NS" for flag -leader-election-namespace: '
        "must be a namespace name (lower-case letters, digits and '-')"
    )
    options = parse("--leader-election-namespace=ome", env={"POD_NAMESPACE": "Bad_NS"})
    assert options.leader_election_namespace == "ome"


def test_unset_flags_are_not_reported_as_set() -> None:
    assert parse("--zap-devel").set_flags == frozenset({"zap-devel"})
