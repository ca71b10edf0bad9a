"""The manager's command-line flags, parsed the way Go's ``flag`` package parses them.

Why: omed replaces OME's Go manager in the same Deployment. The chart, users' patches and
the product pages pass its flags as Go's ``flag`` package reads them: ``--name=value``,
``--name value``, ``-name``, bare booleans and ``--leader-elect=false``, the last
occurrence winning, so a ``kubectl patch`` that appends a flag overrides the chart's. The
troubleshooting pages grep for Go's exact error lines, so those are reproduced verbatim.

Why not :mod:`argparse`: it disagrees with Go where it matters here. It consumes the next
argument as a boolean's value (``--leader-elect false``), refuses a value that starts with
a dash (``--zap-encoder -x``), expands unambiguous prefixes, and prints its own error text;
every one of those would change what a Go-era manifest means. The grammar below is Go's
``FlagSet.parseOne``, about forty lines.

One deliberate difference from Go: Go stops at the first positional argument and silently
ignores it and everything after it (so ``--webhook true --leader-elect`` loses
``--leader-elect``). omed takes no positional arguments, so it refuses one with exit 2.

Invariant: :func:`parse_flags` either returns a fully validated, typed :class:`Options`
(durations in float seconds, worker counts resolved to at least 1) or raises
:class:`FlagError` whose message is the one line the process prints before the usage.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NoReturn, TextIO

from omed.config import flag_values as fv
from omed.config.duration import format_duration
from omed.config.flag_values import ZapLevel
from omed.config.gostrconv import go_quote, parse_go_bool

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


class LeaderElectionTimingError(ValueError):
    """Lease duration, renew deadline and retry period that can't keep a stable leader."""


# --- the flag table ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Flag:
    name: str
    type_name: str  # shown after the name in the usage; "" for a boolean
    parse: Callable[[str], object]
    default: object
    default_text: str
    usage: str

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")

    @property
    def is_bool(self) -> bool:
        return self.type_name == ""


def _flag_table(env: Mapping[str, str]) -> dict[str, _Flag]:
    namespace = env.get("POD_NAMESPACE") or DEFAULT_LEADER_ELECTION_NAMESPACE
    kubeconfig = env.get("KUBECONFIG") or None
    d = Options()

    def dur(seconds: float) -> str:
        return format_duration(seconds)

    flags = [
        _Flag(
            name="metrics-bind-address",
            type_name="string",
            parse=fv.parse_bind_address,
            default=d.metrics_bind_address,
            default_text=go_quote(d.metrics_bind_address),
            usage='The address the metrics endpoint binds to. "0" turns it off.',
        ),
        _Flag(
            name="health-probe-addr",
            type_name="string",
            parse=fv.parse_bind_address,
            default=d.health_probe_addr,
            default_text=go_quote(d.health_probe_addr),
            usage='The address the /healthz and /readyz probes bind to. "0" turns them off.',
        ),
        _Flag(
            name="webhook",
            type_name="",
            parse=parse_go_bool,
            default=d.webhook,
            default_text="false",
            usage="Serve the admission webhooks.",
        ),
        _Flag(
            name="webhook-port",
            type_name="int",
            parse=fv.parse_port,
            default=d.webhook_port,
            default_text=str(d.webhook_port),
            usage="The port the webhook server listens on.",
        ),
        _Flag(
            name="webhook-cert-dir",
            type_name="string",
            parse=fv.parse_non_empty,
            default=d.webhook_cert_dir,
            default_text=go_quote(d.webhook_cert_dir),
            usage="The directory that holds the webhook server's tls.crt and tls.key.",
        ),
        _Flag(
            name="leader-elect",
            type_name="",
            parse=parse_go_bool,
            default=d.leader_elect,
            default_text="false",
            usage=(
                "Elect a leader through the Lease ome-controller-manager-leader-lock, so that\n"
                "only one replica runs the controllers."
            ),
        ),
        _Flag(
            name="leader-election-namespace",
            type_name="string",
            parse=fv.parse_namespace,
            default=namespace,
            default_text=go_quote(namespace),
            usage=(
                "The namespace of the leader election Lease. Defaults to $POD_NAMESPACE,\n"
                f"else {DEFAULT_LEADER_ELECTION_NAMESPACE}."
            ),
        ),
        _Flag(
            name="leader-elect-lease-duration",
            type_name="duration",
            parse=fv.parse_duration,
            default=d.leader_elect_lease_duration,
            default_text=dur(d.leader_elect_lease_duration),
            usage=(
                "How long standbys wait after the last renewal before they take the Lease.\n"
                "Must be longer than the renew deadline."
            ),
        ),
        _Flag(
            name="leader-elect-renew-deadline",
            type_name="duration",
            parse=fv.parse_duration,
            default=d.leader_elect_renew_deadline,
            default_text=dur(d.leader_elect_renew_deadline),
            usage=(
                "How long the leader keeps trying to renew the Lease before it gives up and\n"
                "exits. Must be longer than 1.2 times the retry period."
            ),
        ),
        _Flag(
            name="leader-elect-retry-period",
            type_name="duration",
            parse=fv.parse_duration,
            default=d.leader_elect_retry_period,
            default_text=dur(d.leader_elect_retry_period),
            usage="How often the leader renews the Lease, and standbys try to take it.",
        ),
        _Flag(
            name="inferenceservice-max-concurrent-reconciles",
            type_name="int",
            parse=fv.parse_workers,
            default=d.inferenceservice_max_concurrent_reconciles,
            default_text="1",
            usage="How many InferenceServices are reconciled in parallel. 0 means 1.",
        ),
        _Flag(
            name="inferencereplica-max-concurrent-reconciles",
            type_name="int",
            parse=fv.parse_workers,
            default=d.inferencereplica_max_concurrent_reconciles,
            default_text="1",
            usage="How many InferenceReplicas are reconciled in parallel. 0 means 1.",
        ),
        _Flag(
            name="kube-api-qps",
            type_name="float",
            parse=fv.parse_positive_float,
            default=d.kube_api_qps,
            default_text="20",
            usage="The requests a second that each API client may send to the API server.",
        ),
        _Flag(
            name="kube-api-burst",
            type_name="int",
            parse=fv.parse_positive_int,
            default=d.kube_api_burst,
            default_text=str(d.kube_api_burst),
            usage="The burst of requests that each API client may send above its QPS.",
        ),
        _Flag(
            name="config-cache-ttl",
            type_name="duration",
            parse=fv.parse_non_negative_duration,
            default=d.config_cache_ttl,
            default_text=dur(d.config_cache_ttl),
            usage=(
                "How long the controllers reuse a read of the inferenceservice-config\n"
                "ConfigMap. 0 turns the cache off: every read goes to the API server."
            ),
        ),
        _Flag(
            name="accelerator-resources",
            type_name="string",
            parse=fv.parse_resource_list,
            default=d.accelerator_resources,
            default_text=go_quote(",".join(d.accelerator_resources)),
            usage="Comma-separated extended resource names that count as accelerators.",
        ),
        _Flag(
            name="runtime-revision-retention",
            type_name="int",
            parse=fv.parse_non_negative_int,
            default=d.runtime_revision_retention,
            default_text=str(d.runtime_revision_retention),
            usage=(
                "How many of each runtime's newest ControllerRevisions to keep, besides the\n"
                "revisions that InferenceServices use."
            ),
        ),
        _Flag(
            name="runtime-revision-grace-period",
            type_name="duration",
            parse=fv.parse_non_negative_duration,
            default=d.runtime_revision_grace_period,
            default_text=dur(d.runtime_revision_grace_period),
            usage=(
                "How long a runtime revision stays after OME marks it with\n"
                "ome.io/gc-eligible-since, before it is deleted. Write days in hours: 72h."
            ),
        ),
        _Flag(
            name="zap-encoder",
            type_name="string",
            parse=fv.parse_zap_encoder,
            default=d.zap_encoder,
            default_text=go_quote(d.zap_encoder),
            usage="Zap log encoding (one of 'json' or 'console').",
        ),
        _Flag(
            name="zap-log-level",
            type_name="string",
            parse=fv.parse_zap_level,
            default=d.zap_log_level,
            default_text=go_quote(str(d.zap_log_level)),
            usage=(
                "Zap level to configure the verbosity of logging. One of 'debug', 'info',\n"
                "'error', 'panic', or an integer > 0 for custom debug levels of increasing\n"
                "verbosity. Defaults to debug with --zap-devel."
            ),
        ),
        _Flag(
            name="zap-devel",
            type_name="",
            parse=parse_go_bool,
            default=d.zap_devel,
            default_text="false",
            usage="Development mode: the log level defaults to debug.",
        ),
        _Flag(
            name="kubeconfig",
            type_name="string",
            parse=fv.parse_kubeconfig,
            default=kubeconfig,
            default_text=go_quote(kubeconfig or ""),
            usage=(
                "Path to a kubeconfig. Defaults to $KUBECONFIG; when both are empty, the\n"
                "in-cluster configuration is used."
            ),
        ),
    ]
    return {flag.name: flag for flag in flags}


FLAG_NAMES: tuple[str, ...] = tuple(sorted(_flag_table({})))
"""Every flag the manager defines, without dashes."""


def usage(env: Mapping[str, str], *, program: str = PROGRAM_NAME) -> str:
    """The usage text, in Go's ``PrintDefaults`` layout, with every flag's default."""
    lines = [f"Usage of {program}:"]
    for name, flag in sorted(_flag_table(env).items()):
        head = f"  -{name}"
        if flag.type_name:
            head += f" {flag.type_name}"
        lines.append(head)
        body = flag.usage.replace("\n", "\n    \t")
        lines.append(f"    \t{body} (default {flag.default_text})")
    return "\n".join(lines) + "\n"


def _unexpected(arg: str) -> FlagError:
    return FlagError(
        f"unexpected argument {go_quote(arg)}: {PROGRAM_NAME} takes flags only; "
        "give a boolean flag its value as -name=value"
    )


def parse_flags(argv: Sequence[str], env: Mapping[str, str]) -> Options:
    """Parse ``argv`` (without the program name) into :class:`Options`.

    ``env`` supplies the environment-derived defaults (``POD_NAMESPACE``, ``KUBECONFIG``).
    Raises :class:`HelpRequested` for ``-h``/``--help`` and :class:`FlagError` otherwise.
    """
    table = _flag_table(env)
    values: dict[str, object] = {flag.attr: flag.default for flag in table.values()}
    seen: set[str] = set()
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if len(arg) < 2 or arg[0] != "-":
            raise _unexpected(arg)
        minuses = 2 if arg[1] == "-" else 1
        if minuses == 2 and len(arg) == 2:  # "--" ends the flags
            if i + 1 < len(args):
                raise _unexpected(args[i + 1])
            break
        name = arg[minuses:]
        if not name or name[0] in "-=":
            raise FlagError(f"bad flag syntax: {arg}")
        i += 1
        has_value = False
        value = ""
        equals = name.find("=", 1)
        if equals != -1:
            name, value, has_value = name[:equals], name[equals + 1 :], True
        flag = table.get(name)
        if flag is None:
            if name in ("help", "h"):
                raise HelpRequested(usage(env))
            raise FlagError(f"flag provided but not defined: -{name}")
        parsed: object
        if flag.is_bool:
            if not has_value:
                parsed = True
            else:
                try:
                    parsed = flag.parse(value)
                except ValueError as exc:
                    raise FlagError(
                        f"invalid boolean value {go_quote(value)} for -{name}: {exc}"
                    ) from None
        else:
            if not has_value:
                if i >= len(args):
                    raise FlagError(f"flag needs an argument: -{name}")
                value = args[i]
                i += 1
            try:
                parsed = flag.parse(value)
            except ValueError as exc:
                raise FlagError(
                    f"invalid value {go_quote(value)} for flag -{name}: {exc}"
                ) from None
        values[flag.attr] = parsed
        seen.add(name)
    if values["zap_devel"] is True and "zap-log-level" not in seen:
        values["zap_log_level"] = "debug"  # controller-runtime's development default
    return Options(**values, set_flags=frozenset(seen))  # type: ignore[arg-type]


def parse_flags_or_exit(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> Options:
    """:func:`parse_flags` for ``main``: help to stdout and exit 0; an error line and the
    usage to stderr and exit 2, as Go's ``flag.ExitOnError`` does."""
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
