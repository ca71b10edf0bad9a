"""The manager's command-line flags, read the way Go's ``flag`` package reads them.

Why: omed replaces OME's Go manager in the same Deployment. The chart and users' patches
pass its flags as Go's ``flag`` package reads them: ``--name=value``,
``--name value``, ``-name``, bare booleans and ``--leader-elect=false``, the last
occurrence winning, so a ``kubectl patch`` that appends a flag overrides the chart's.
Operators grep for Go's exact error lines, so those are reproduced verbatim.

How: one :class:`argparse.ArgumentParser`, declared from the flag table, converts the values
(through :mod:`omed.config.flag_values`), applies the defaults, keeps the last occurrence
and prints the help in Go's ``PrintDefaults`` layout. In front of it, :func:`_normalise`
rewrites Go's token grammar (``FlagSet.parseOne``) into ``--name=value`` tokens, because
argparse alone reads that grammar differently: it takes the next argument as a boolean's
value (``--leader-elect false``), refuses a value that starts with a dash
(``--zap-encoder -x``) and knows neither ``-name`` for a long flag nor Go's error lines.

One deliberate difference from Go: Go stops at the first positional argument and silently
ignores it and everything after it (so ``--webhook true --leader-elect`` loses
``--leader-elect``). omed takes no positional arguments, so it refuses one with exit 2.

Invariant: :func:`parse_flags` either returns a fully validated, typed :class:`Options`
(durations in float seconds, worker counts resolved to at least 1) or raises
:class:`FlagError` whose message is the one line the process prints before the usage; the
first argument that Go would refuse decides which line.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, NoReturn, TextIO

from omed.config import flag_values as fv
from omed.config.duration import format_duration
from omed.config.flag_values import ZapLevel
from omed.config.gostrconv import go_quote, parse_go_bool
from omed.version import VERSION

__all__ = [
    "DEFAULT_ACCELERATOR_RESOURCES",
    "DEFAULT_LEADER_ELECTION_NAMESPACE",
    "FLAG_NAMES",
    "INVALID_LEADER_ELECTION_TIMING",
    "PROGRAM_NAME",
    "FlagError",
    "HelpRequested",
    "LeaderElectionTimingError",
    "Options",
    "VersionRequested",
    "ZapLevel",
    "check_leader_election_timing",
    "parse_flags",
    "parse_flags_or_exit",
    "usage",
]

PROGRAM_NAME = "omed"
DEFAULT_LEADER_ELECTION_NAMESPACE = "ome"
DEFAULT_ACCELERATOR_RESOURCES: tuple[str, ...] = ("nvidia.com/gpu",)
INVALID_LEADER_ELECTION_TIMING = "Invalid leader election timing"
"""The log message the manager writes (with the error) before it exits 1."""

# client-go's leaderelection.JitterFactor: renewDeadline must exceed 1.2 x retryPeriod.
_LEADER_ELECTION_JITTER = 1.2


@dataclass(frozen=True, kw_only=True)
class Options:
    """The validated flags. Every field has the flag's default, so ``Options()`` is usable."""

    metrics_bind_address: str = ":8080"
    health_probe_addr: str = ":8081"
    webhook: bool = False
    webhook_port: int = 9443
    webhook_cert_dir: str = "/tmp/k8s-webhook-server/serving-certs"
    leader_elect: bool = False
    leader_election_namespace: str = DEFAULT_LEADER_ELECTION_NAMESPACE
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    graceful_shutdown_timeout: float = 25.0
    """The whole ordered stop's deadline: Kubernetes' default 30 s grace period less 5 s."""
    inferenceservice_max_concurrent_reconciles: int = 1
    inferencereplica_max_concurrent_reconciles: int = 1
    kube_api_qps: float = 20.0
    kube_api_burst: int = 30
    config_cache_ttl: float = 30.0
    accelerator_resources: tuple[str, ...] = DEFAULT_ACCELERATOR_RESOURCES
    runtime_revision_retention: int = 10
    runtime_revision_grace_period: float = 24 * 3600.0
    zap_encoder: Literal["console", "json"] = "console"
    zap_log_level: ZapLevel = "info"
    zap_devel: bool = False
    kubeconfig: str | None = None
    """Path to a kubeconfig; ``None`` means the in-cluster configuration."""
    set_flags: frozenset[str] = field(default_factory=frozenset)
    """Names of the flags given on the command line (without dashes), for the startup log."""


class FlagError(Exception):
    """A command line that can't be used; ``message`` is the line printed before the usage."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class HelpRequested(FlagError):
    """``-h``/``--help``: ``message`` is the usage text, and the exit code is 0."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=0)


class VersionRequested(HelpRequested):
    """``--version``/``-version``: ``message`` is omed's version (:data:`omed.version.VERSION`)
    on a line of its own, and the exit code is 0.

    Like ``-h`` it isn't a flag of the table: OME's manager has no such flag, so the usage
    (Go's layout of OME's flags) doesn't list it, and the chart never passes it.
    """

    def __init__(self) -> None:
        super().__init__(f"{VERSION}\n")


class LeaderElectionTimingError(ValueError):
    """Lease duration, renew deadline and retry period that can't keep a stable leader."""


# --- the flag table ----------------------------------------------------------------------


class _Flag(NamedTuple):
    """One flag: its Go type (shown in the usage), its value parser and its usage text.

    Its default is the :class:`Options` field of the same name (``-`` read as ``_``), so the
    table and ``Options()`` can't disagree.
    """

    name: str
    kind: Literal["bool", "duration", "float", "int", "string"]
    parse: Callable[[str], object]
    usage: str


_FLAGS = (
    _Flag(
        "metrics-bind-address",
        "string",
        fv.parse_bind_address,
        'The address the metrics endpoint binds to. "0" turns it off.',
    ),
    _Flag(
        "health-probe-addr",
        "string",
        fv.parse_bind_address,
        'The address the /healthz and /readyz probes bind to. "0" turns them off.',
    ),
    _Flag("webhook", "bool", parse_go_bool, "Serve the admission webhooks."),
    _Flag("webhook-port", "int", fv.parse_port, "The port the webhook server listens on."),
    _Flag(
        "webhook-cert-dir",
        "string",
        fv.parse_non_empty,
        "The directory that holds the webhook server's tls.crt and tls.key.",
    ),
    _Flag(
        "leader-elect",
        "bool",
        parse_go_bool,
        "Elect a leader through the Lease ome-controller-manager-leader-lock, so that\n"
        "only one replica runs the controllers.",
    ),
    _Flag(
        "leader-election-namespace",
        "string",
        fv.parse_namespace,
        "The namespace of the leader election Lease. Defaults to $POD_NAMESPACE,\n"
        f"else {DEFAULT_LEADER_ELECTION_NAMESPACE}.",
    ),
    _Flag(
        "leader-elect-lease-duration",
        "duration",
        fv.parse_duration,
        "How long standbys wait after the last renewal before they take the Lease.\n"
        "Must be longer than the renew deadline.",
    ),
    _Flag(
        "leader-elect-renew-deadline",
        "duration",
        fv.parse_duration,
        "How long the leader keeps trying to renew the Lease before it gives up and\n"
        "exits. Must be longer than 1.2 times the retry period.",
    ),
    _Flag(
        "leader-elect-retry-period",
        "duration",
        fv.parse_duration,
        "How often the leader renews the Lease, and standbys try to take it.",
    ),
    _Flag(
        "graceful-shutdown-timeout",
        "duration",
        fv.parse_non_negative_duration,
        "How long the whole stop after SIGTERM may take: drain, Lease release, event\n"
        "flush and server shutdowns. What is still running then is cut short, and the\n"
        "manager exits 1. Keep it below the pod's terminationGracePeriodSeconds.",
    ),
    _Flag(
        "inferenceservice-max-concurrent-reconciles",
        "int",
        fv.parse_workers,
        "How many InferenceServices are reconciled in parallel. 0 means 1.",
    ),
    _Flag(
        "inferencereplica-max-concurrent-reconciles",
        "int",
        fv.parse_workers,
        "How many InferenceReplicas are reconciled in parallel. 0 means 1.",
    ),
    _Flag(
        "kube-api-qps",
        "float",
        fv.parse_positive_float,
        "The requests a second that each API client may send to the API server.",
    ),
    _Flag(
        "kube-api-burst",
        "int",
        fv.parse_positive_int,
        "The burst of requests that each API client may send above its QPS.",
    ),
    _Flag(
        "config-cache-ttl",
        "duration",
        fv.parse_non_negative_duration,
        "How long the controllers reuse a read of the inferenceservice-config\n"
        "ConfigMap. 0 turns the cache off: every read goes to the API server.",
    ),
    _Flag(
        "accelerator-resources",
        "string",
        fv.parse_resource_list,
        "Comma-separated extended resource names that count as accelerators.",
    ),
    _Flag(
        "runtime-revision-retention",
        "int",
        fv.parse_non_negative_int,
        "How many of each runtime's newest ControllerRevisions to keep, besides the\n"
        "revisions that InferenceServices use.",
    ),
    _Flag(
        "runtime-revision-grace-period",
        "duration",
        fv.parse_non_negative_duration,
        "How long a runtime revision stays after OME marks it with\n"
        "ome.io/gc-eligible-since, before it is deleted. Write days in hours: 72h.",
    ),
    _Flag(
        "zap-encoder",
        "string",
        fv.parse_zap_encoder,
        "Zap log encoding (one of 'json' or 'console').",
    ),
    _Flag(
        "zap-log-level",
        "string",
        fv.parse_zap_level,
        "Zap level to configure the verbosity of logging. One of 'debug', 'info',\n"
        "'error', 'panic', or an integer > 0 for custom debug levels of increasing\n"
        "verbosity. Defaults to debug with --zap-devel.",
    ),
    _Flag("zap-devel", "bool", parse_go_bool, "Development mode: the log level defaults to debug."),
    _Flag(
        "kubeconfig",
        "string",
        fv.parse_kubeconfig,
        "Path to a kubeconfig. Defaults to $KUBECONFIG; when both are empty, the\n"
        "in-cluster configuration is used.",
    ),
)

FLAG_NAMES: tuple[str, ...] = tuple(sorted(flag.name for flag in _FLAGS))
"""Every flag the manager defines, without dashes."""

_BOOLEANS = frozenset(flag.name for flag in _FLAGS if flag.kind == "bool")


# --- argparse, declared from the table -------------------------------------------------------


def _go_text(kind: str, value: object) -> str:
    """Go's DefValue of a default: the text that, given to the flag, sets that value.

    argparse runs a text default through the flag's ``type``, as it does a value, so a
    default taken from the environment meets the same rules as one on the command line.
    """
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return format_duration(value) if kind == "duration" else repr(value).removesuffix(".0")
    if isinstance(value, tuple):
        return ",".join(value)
    return "" if value is None else str(value)


def _converter(flag: _Flag) -> Callable[[str], object]:
    """The flag's value parser as an argparse ``type``: a refusal becomes Go's line."""

    def convert(text: str) -> object:
        try:
            return flag.parse(text)
        except ValueError as exc:
            where = f"-{flag.name}" if flag.kind == "bool" else f"flag -{flag.name}"
            kind = "boolean value" if flag.kind == "bool" else "value"
            raise argparse.ArgumentTypeError(
                f"invalid {kind} {go_quote(text)} for {where}: {exc}"
            ) from None

    return convert


class _Help(argparse.Action):
    """Go's ErrHelp: the parse stops where ``-h`` stands, with the usage as the message."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        raise HelpRequested(parser.format_help())


class _Version(argparse.Action):
    """``--version`` stops the parse where it stands, as ``-h`` does."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        raise VersionRequested()


class _GoFlagSet(argparse.ArgumentParser):
    """argparse speaking as Go's ``flag`` package: an error raises :class:`FlagError` with
    Go's line, the help is ``PrintDefaults``' layout with every default shown, and every
    value reaches its ``type``."""

    def error(self, message: str) -> NoReturn:
        raise FlagError(message)

    def format_help(self) -> str:
        lines = [f"Usage of {self.prog}:"]
        for action in sorted(self._actions, key=lambda action: action.option_strings[0]):
            if action.help == argparse.SUPPRESS:
                continue
            head = f"  -{action.option_strings[0][2:]}"
            lines.append(f"{head} {action.metavar}" if action.metavar else head)
            shown = go_quote(action.default) if action.metavar == "string" else action.default
            lines.append(f"    \t{action.help} (default {shown})".replace("\n", "\n    \t"))
        return "\n".join(lines) + "\n"

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # argparse drops a value of exactly "--" (`--kubeconfig=--`) before its type sees
        # it; Go's flag package sets it like any other value.
        if action.nargs is None and arg_strings == ["--"]:
            return self._get_value(action, "--")
        return super()._get_values(action, arg_strings)


def _flag_set(env: Mapping[str, str], program: str = PROGRAM_NAME) -> _GoFlagSet:
    """The parser; ``env`` supplies the defaults of two flags, as in Go's manager."""
    defaults = dataclasses.replace(
        Options(),
        leader_election_namespace=env.get("POD_NAMESPACE") or DEFAULT_LEADER_ELECTION_NAMESPACE,
        kubeconfig=env.get("KUBECONFIG") or None,
    )
    parser = _GoFlagSet(prog=program, add_help=False, allow_abbrev=False, exit_on_error=False)
    for flag in _FLAGS:
        parser.add_argument(
            f"--{flag.name}",
            type=_converter(flag),
            default=_go_text(flag.kind, getattr(defaults, flag.name.replace("-", "_"))),
            metavar=None if flag.kind == "bool" else flag.kind,
            help=flag.usage,
        )
    parser.add_argument(
        "--help", action=_Help, nargs=0, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    return parser


def usage(env: Mapping[str, str], *, program: str = PROGRAM_NAME) -> str:
    """The usage text, in Go's ``PrintDefaults`` layout, with every flag's default."""
    return _flag_set(env, program).format_help()


# --- Go's token grammar ----------------------------------------------------------------------


def _unexpected(arg: str) -> str:
    return (
        f"unexpected argument {go_quote(arg)}: {PROGRAM_NAME} takes flags only; "
        "give a boolean flag its value as -name=value"
    )


def _normalise(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """Go's ``FlagSet.parseOne`` over ``argv``, written out as ``--name=value`` tokens.

    Returns the tokens up to the first argument Go refuses, and Go's line for it (``None``
    when there is none). argparse reads the tokens first, so a bad value before that
    argument is still the one reported, as in Go. ``-h``/``-help`` becomes ``--help`` and
    ends the tokens: Go reads nothing after it.
    """
    tokens: list[str] = []
    args = iter(argv)
    for arg in args:
        if len(arg) < 2 or arg[0] != "-":
            return tokens, _unexpected(arg)
        if arg == "--":  # ends the flags; omed takes nothing after them
            rest = next(args, None)
            return tokens, None if rest is None else _unexpected(rest)
        name, has_value, value = arg.removeprefix("-").removeprefix("-").partition("=")
        if not name or name[0] == "-":
            return tokens, f"bad flag syntax: {arg}"
        if name not in FLAG_NAMES:
            if name in ("h", "help"):
                return [*tokens, "--help"], None
            if name == "version" and not has_value:
                return [*tokens, "--version"], None
            return tokens, f"flag provided but not defined: -{name}"
        if not has_value and name in _BOOLEANS:
            value = "true"
        elif not has_value:
            following = next(args, None)
            if following is None:
                return tokens, f"flag needs an argument: -{name}"
            value = following
        tokens.append(f"--{name}={value}")
    return tokens, None


def parse_flags(argv: Sequence[str], env: Mapping[str, str]) -> Options:
    """Parse ``argv`` (without the program name) into :class:`Options`.

    ``env`` supplies the environment-derived defaults (``POD_NAMESPACE``, ``KUBECONFIG``).
    Raises :class:`HelpRequested` for ``-h``/``--help`` (:class:`VersionRequested`, a kind of
    it, for ``--version``) and :class:`FlagError` otherwise.
    """
    parser = _flag_set(env)
    tokens, refusal = _normalise(argv)
    try:
        values = vars(parser.parse_args(tokens))
    except argparse.ArgumentError as exc:
        parser.error(exc.message)
    if refusal is not None:
        parser.error(refusal)
    given = frozenset(token[2:].partition("=")[0] for token in tokens)
    if values["zap_devel"] and "zap-log-level" not in given:
        values["zap_log_level"] = "debug"  # controller-runtime's development default
    return Options(**values, set_flags=given)


def parse_flags_or_exit(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> Options:
    """:func:`parse_flags` for ``main``: help or the version to stdout and exit 0; an error
    line and the usage to stderr and exit 2, as Go's ``flag.ExitOnError`` does."""
    try:
        return parse_flags(argv, env)
    except HelpRequested as exc:
        _write(stdout or sys.stdout, exc.message)
        _exit(exc.exit_code)
    except FlagError as exc:
        _write(stderr or sys.stderr, f"{exc.message}\n{usage(env)}")
        _exit(exc.exit_code)


def _write(stream: TextIO, text: str) -> None:
    stream.write(text)
    stream.flush()


def _exit(code: int) -> NoReturn:
    raise SystemExit(code)


def check_leader_election_timing(options: Options) -> None:
    """client-go's rule: lease duration > renew deadline > 1.2 x retry period, all positive.

    Raises :class:`LeaderElectionTimingError`; the manager logs it under
    :data:`INVALID_LEADER_ELECTION_TIMING` and exits 1. The check doesn't depend on
    ``--leader-elect``, so a bad value can't hide until leader election is turned on.
    """
    lease = round(options.leader_elect_lease_duration * 1e9)
    renew = round(options.leader_elect_renew_deadline * 1e9)
    retry = round(options.leader_elect_retry_period * 1e9)
    shown = {
        "lease": f"--leader-elect-lease-duration={format_duration(lease / 1e9)}",
        "renew": f"--leader-elect-renew-deadline={format_duration(renew / 1e9)}",
        "retry": f"--leader-elect-retry-period={format_duration(retry / 1e9)}",
    }
    for key, value in (("lease", lease), ("renew", renew), ("retry", retry)):
        if value <= 0:
            raise LeaderElectionTimingError(f"{shown[key]} must be greater than zero")
    if lease <= renew:
        raise LeaderElectionTimingError(f"{shown['lease']} must be greater than {shown['renew']}")
    jittered = int(_LEADER_ELECTION_JITTER * retry)
    if renew <= jittered:
        raise LeaderElectionTimingError(
            f"{shown['renew']} must be greater than 1.2 x {shown['retry']} "
            f"({format_duration(jittered / 1e9)})"
        )
