"""``kubectl-ome``: the ``kubectl ome`` plugin (kubectl runs any ``kubectl-ome`` on the PATH).

Why: the plugin's flags, help, output and exit codes are an interface users script against.
This module is its entry point: the commands and their flags, the help, the usage errors,
and the dispatch to the module that runs a command. It imports nothing but the standard
library, so ``kubectl ome --help``, a usage error, ``version`` and shell completion answer
at once; a command's own module (the API client, the report builders) is imported only when
that command runs (docs/performance.md, "kubectl ome", "Start-up").

The commands are a table, :data:`COMMANDS` (and :data:`GROUPS` for the words that only
gather commands, such as ``instance``): each entry names its words, its help and examples,
a function that declares its flags, and the ``module:function`` that runs it. A new command
is one more entry; the parser, the help, the "unknown command" errors and the completion
all come from the table.

Invariants (exit codes): 0 when a report was printed (whatever it says, as kubectl get
does: the EVIDENCE and ISSUE values carry the problems), and for help, ``version`` and
``completion``; bare ``kubectl ome`` (or a group such as ``kubectl ome instance``) prints
its help and exits 0, as kubectl's own command groups do. A report whose InferenceReplicas
couldn't be listed at all (state ``UNAVAILABLE``, for status ``Unavailable``) exits 1 after
printing; 1 for every error, which prints ``error: <message>`` on stderr and nothing on
stdout: a bad flag, an InferenceService that can't be read, a kubeconfig that can't be used.
Never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

TYPE_CHECKING = False  # typing's own, without importing typing: --help needs none of it
if TYPE_CHECKING:
    from typing import Any, Final, NoReturn, TextIO

__all__ = [
    "COMMANDS",
    "GROUPS",
    "PROGRAM",
    "Command",
    "CommandError",
    "Group",
    "Streams",
    "UsageError",
    "build_parser",
    "complete_main",
    "main",
    "run",
]

PROGRAM: Final = "kubectl ome"
EXECUTABLE: Final = "kubectl-ome"
EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_UNMET: Final = 2
"""kubectl ome wait: the condition didn't hold in time (upstream's assertion-unmet code)."""
EXIT_CONFLICT: Final = 3
"""A state conflict, a lookup miss or a change during a migration command (upstream's 3)."""
DEFAULT_TIMEOUT: Final = 30.0
"""--request-timeout when it isn't given (or is 0): 30 seconds for each API request."""
DEFAULT_WAIT: Final = 60.0
"""Without --timeout, kubectl ome wait stops after 60 seconds."""
DEFAULT_DRAIN_TIMEOUT: Final = 3600.0
"""Without --timeout, migration drain-node follows its migrations for an hour."""
OUTPUTS: Final = ("table", "json", "yaml")
LIST_OUTPUTS: Final = ("table", "name", "json", "yaml")
"""The outputs of the list-type commands (instance list, retry-blocks): kubectl get's
``-o name`` and ``--no-headers`` too."""
STATUS_OUTPUTS: Final = ("table", "wide", "json", "yaml")
COMPONENTS: Final = ("engine", "decoder", "router")
""":data:`omed.api.constants.COMPONENTS`, spelled here so that the help needs no import of
the API package (a unit test keeps the two equal)."""
DRY_RUN_MODES: Final = ("none", "client", "server")
""":data:`omed.cli.release_held.DRY_RUN_MODES` (a unit test keeps the two equal)."""
DEFAULT_MANAGER_NAMESPACE: Final = "ome"
WAIT_CONDITIONS: Final = ("held-revision=unheld", "migration=terminal")
COMPLETION_SHELLS: Final = ("bash", "zsh")

INVALID_TIMEOUT: Final = (
    "Invalid timeout value. Timeout must be a single integer in seconds, or an integer "
    "followed by a corresponding time unit (e.g. 1s | 2m | 3h)"
)
"""kubectl's own error for a ``--request-timeout`` it can't read (client-go's
``clientcmd.ParseTimeout``), word for word."""


class UsageError(Exception):
    """A bad flag or argument: ``error: <message>`` and exit 1."""


class CommandError(Exception):
    """An error after the flags parsed (an InferenceService that can't be read, a refused
    release): ``error: <message>`` and exit ``exit_code``: 1, or 3 for a state conflict
    (a migration's precondition, a lookup miss, a change during the command)."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class HelpShown(Exception):
    """``-h``/``--help`` was given: print the parser's help, exit 0."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def print_help(self, file: Any = None) -> NoReturn:
        """``-h``/``--help``: :func:`run` prints this parser's help where the run writes."""
        del file
        raise HelpShown(self)


# -- Go durations ------------------------------------------------------------------------------


def _go_duration_ns(text: str) -> int:
    """Go's ``time.ParseDuration`` (:func:`omed.config.duration.parse_duration_ns`, the one
    parser omed has for it); raises its ``DurationError`` with Go's message."""
    from omed.config.duration import parse_duration_ns

    return parse_duration_ns(text)


def _request_timeout(text: str) -> float:
    """``--request-timeout`` as kubectl reads it (client-go's ``clientcmd.ParseTimeout``):
    whole seconds (``30``), else a Go duration (``1m30s``, ``500ms``), else kubectl's
    ``Invalid timeout value`` error. Empty or 0 means the plugin's default, 30 s; a
    negative duration (which kubectl would send as such) is refused."""
    if text == "":
        return DEFAULT_TIMEOUT
    digits = text[1:] if text[0] in "+-" else text
    if digits.isascii() and digits.isdigit() and 0 <= int(text) < 2**63:  # strconv.ParseInt
        return float(int(text)) or DEFAULT_TIMEOUT
    try:
        nanoseconds = _go_duration_ns(text)
    except ValueError:
        raise UsageError(INVALID_TIMEOUT) from None
    if nanoseconds < 0:
        raise UsageError(
            f'invalid argument "{text}" for "--request-timeout" flag: must be 0 or more'
        )
    return nanoseconds / 1e9 or DEFAULT_TIMEOUT


def _wait_timeout(text: str) -> float:
    """``wait --timeout``, a Go duration as kubectl wait's ``--timeout`` takes it (``30s``,
    ``1m30s``; a bare number has no unit and is refused, as kubectl refuses it); 0 checks once."""
    try:
        nanoseconds = _go_duration_ns(text)
    except ValueError as exc:
        raise UsageError(f'invalid argument "{text}" for "--timeout" flag: {exc}') from None
    if nanoseconds < 0:
        raise UsageError(f'invalid argument "{text}" for "--timeout" flag: must be 0 or more')
    return nanoseconds / 1e9


def _index(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise argparse.ArgumentTypeError(
            f"invalid INDEX {text!r}: want an Instance index such as 0 (IDX in instance list)"
        )
    return int(text)


# -- The command table -------------------------------------------------------------------------


class _Offer:
    """The values shell completion offers for a flag whose parser doesn't restrict them to
    ``choices`` (those are checked by the command, with its own wording)."""

    def __init__(self, *values: str) -> None:
        self.values = values

    def __call__(self, **_: object) -> tuple[str, ...]:
        return self.values


def _offer(action: argparse.Action, *values: str) -> None:
    action.completer = _Offer(*values)  # type: ignore[attr-defined]  # argcomplete's hook


def kube_flags(parser: argparse.ArgumentParser) -> None:
    """The kubeconfig flags every command that reads the cluster takes."""
    group = parser.add_argument_group("kubeconfig flags")
    group.add_argument("-n", "--namespace", help="the InferenceService's namespace")
    group.add_argument("--context", help="the kubeconfig context to use")
    kubeconfig = group.add_argument("--kubeconfig", help="path to the kubeconfig file")
    kubeconfig.completer = _FILES  # type: ignore[attr-defined]
    group.add_argument(
        "--request-timeout",
        type=_request_timeout,
        default=DEFAULT_TIMEOUT,
        metavar="DURATION",
        help="how long to wait for each API request: whole seconds or a Go duration "
        "(30, 1m30s, 500ms; default 30s, 0 means the default)",
    )


_FILES: Final = "files"
"""Marks a flag whose value is a path: completion leaves it to the shell's file names."""


def _output(parser: argparse.ArgumentParser, outputs: Sequence[str], help_text: str) -> None:
    action = parser.add_argument("-o", "--output", default="table", help=help_text)
    _offer(action, *outputs)


def _component(parser: argparse.ArgumentParser) -> None:
    action = parser.add_argument(
        "--component", required=True, help=f"the component: {', '.join(COMPONENTS)}"
    )
    _offer(action, *COMPONENTS)


def _no_headers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-headers",
        action="store_true",
        help="leave out the table's header line (as kubectl get --no-headers)",
    )


def _manager_namespace(parser: argparse.ArgumentParser, read_for: str) -> None:
    """``--manager-namespace``; ``read_for`` finishes its help: what the command reads there."""
    parser.add_argument(
        "--manager-namespace",
        default=DEFAULT_MANAGER_NAMESPACE,
        help=f"where the manager's inferenceservice-config lives (default ome){read_for}",
    )


def _list_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    _output(parser, LIST_OUTPUTS, "table (default), name, json or yaml")
    _no_headers(parser)
    kube_flags(parser)


def _retry_blocks_flags(parser: argparse.ArgumentParser) -> None:
    _list_flags(parser)
    _component(parser)


def _status_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    parser.add_argument("index", metavar="INDEX", type=_index)
    _output(parser, STATUS_OUTPUTS, "table (default), wide, json or yaml")
    _component(parser)
    _manager_namespace(
        parser,
        ", read only when the deployment mode falls back to its deploy.defaultDeploymentMode",
    )
    kube_flags(parser)


def _release_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    _component(parser)
    parser.add_argument(
        "--revision",
        required=True,
        help="the block's full target revision (chat-engine-7f9c4d2b) or its hash (7f9c4d2b)",
    )
    parser.add_argument(
        "--dry-run",
        default="none",
        choices=DRY_RUN_MODES,
        help="client: check everything, send nothing; server: the API server checks the patch "
        "without storing it; none (default): release",
    )
    parser.add_argument("--yes", action="store_true", help="skip the prompt (never a check)")
    _output(parser, OUTPUTS, "table (default; wide is table), json or yaml")
    kube_flags(parser)


def _wait_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    condition = parser.add_argument(
        "--for",
        dest="condition",
        required=True,
        help="held-revision=unheld (with --component) or migration=terminal (with --request-id)",
    )
    _offer(condition, *WAIT_CONDITIONS)
    component = parser.add_argument(
        "--component",
        help=f"held-revision only: the component ({', '.join(COMPONENTS)})",
    )
    _offer(component, *COMPONENTS)
    parser.add_argument(
        "--revision",
        help="held-revision only: the held revision (full name or hash); without it, until "
        "no block is Held",
    )
    parser.add_argument(
        "--request-id",
        metavar="UUID",
        help="migration only: the request-id migration start printed",
    )
    parser.add_argument(
        "--timeout",
        type=_wait_timeout,
        default=DEFAULT_WAIT,
        metavar="DURATION",
        help="how long to wait, a Go duration (60s, 1m30s, 30m; default 60s; 0: check once)",
    )
    kube_flags(parser)


def _plan_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    _component(parser)
    _output(parser, OUTPUTS, "table (default), json or yaml")
    _manager_namespace(parser, ": the settings the pass plans with")
    kube_flags(parser)


def _get_ir_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", metavar="NAME", nargs="*", help="only these InferenceReplicas")
    parser.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="every namespace (the table leads with NAMESPACE)",
    )
    _output(parser, LIST_OUTPUTS, "table (default), name, json or yaml")
    _no_headers(parser)
    kube_flags(parser)


def _migration_start_flags(parser: argparse.ArgumentParser) -> None:
    """migration start's flags: the values are checked by the command, in upstream's order
    and words (omed.cli.migration_start.check_flags), so none is ``required`` or has
    ``choices`` here."""
    parser.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    component = parser.add_argument(
        "--component", help=f"the component (required): {', '.join(COMPONENTS)}"
    )
    _offer(component, *COMPONENTS)
    parser.add_argument("--instance", metavar="INDEX", help="the Instance to move (required)")
    parser.add_argument(
        "--from-node",
        help="the node to leave; needed when the Instance's pods span several nodes",
    )
    parser.add_argument(
        "--hint-node",
        action="append",
        metavar="NODE[,NODE...]",
        help="up to eight nodes the replacement should prefer (comma-separated or repeated)",
    )
    parser.add_argument(
        "--reason",
        help="why, kept in the migration record (plain text, no URLs or credentials)",
    )
    parser.add_argument(
        "--requested-by", default="kubectl-ome", help="who asks (default kubectl-ome)"
    )
    parser.add_argument(
        "--request-id",
        metavar="UUID",
        help="look up the request of this UUID (a preview's Request UUID) instead of sending one",
    )
    parser.add_argument("--yes", action="store_true", help="skip the prompt (never a check)")
    dry_run = parser.add_argument(
        "--dry-run",
        default="none",
        help="client: check everything, send nothing; server: the API server and OME's "
        "webhook check the request without storing it; none (default): send it",
    )
    _offer(dry_run, *DRY_RUN_MODES)
    _output(parser, STATUS_OUTPUTS, "table (default; wide is table), json or yaml")
    parser.add_argument(
        "--ome-namespace",
        default=DEFAULT_MANAGER_NAMESPACE,
        help="OME's namespace, shown in the preview (default ome)",
    )
    kube_flags(parser)


def _migration_status_flags(
    parser: argparse.ArgumentParser,
    outputs: Sequence[str] = OUTPUTS,
    output_help: str = "table (default), json or yaml",
) -> None:
    parser.add_argument("inferenceservice", metavar="INFERENCESERVICE")
    component = parser.add_argument(
        "--component", help=f"only this component: {', '.join(COMPONENTS)}"
    )
    _offer(component, *COMPONENTS)
    _output(parser, outputs, output_help)
    kube_flags(parser)


def _migration_history_flags(parser: argparse.ArgumentParser) -> None:
    _migration_status_flags(parser, STATUS_OUTPUTS, "table (default), wide, json or yaml")


def _migration_drain_flags(parser: argparse.ArgumentParser) -> None:
    """migration drain-node's flags: the request's values are checked as migration start
    checks them (omed.cli.migration_start.check_flags)."""
    parser.add_argument("node", metavar="NODE")
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", help="Instances of every namespace"
    )
    parser.add_argument(
        "--reason", help='kept in each migration record (default "drain-node NODE")'
    )
    parser.add_argument(
        "--requested-by", default="kubectl-ome", help="who asks (default kubectl-ome)"
    )
    parser.add_argument(
        "--max-in-flight",
        metavar="N",
        help="at most N migrations in flight (never more than lifecycle.audit's "
        "maxInFlightMigrations; without it the caps' own)",
    )
    parser.add_argument("--yes", action="store_true", help="skip the prompt (never a check)")
    dry_run = parser.add_argument(
        "--dry-run",
        nargs="?",
        const="client",
        default="none",
        help="client (or bare --dry-run): check and list, send nothing; server: the API "
        "server and OME's webhook check each request without storing it; none (default)",
    )
    _offer(dry_run, *DRY_RUN_MODES)
    _output(parser, STATUS_OUTPUTS, "table (default; wide is table), json or yaml")
    parser.add_argument(
        "--ome-namespace",
        default=DEFAULT_MANAGER_NAMESPACE,
        help="where OME's inferenceservice-config (the caps) lives (default ome)",
    )
    parser.add_argument(
        "--timeout",
        type=_wait_timeout,
        default=DEFAULT_DRAIN_TIMEOUT,
        metavar="DURATION",
        help="how long to follow the migrations, a Go duration (default 1h); what was sent "
        "stays, and a later run follows it",
    )
    kube_flags(parser)


def _version_flags(parser: argparse.ArgumentParser) -> None:
    del parser  # no flags


def _completion_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", metavar="SHELL", choices=COMPLETION_SHELLS, help="bash or zsh")


class Group:
    """A word that only gathers commands (``kubectl ome instance``): its help is printed
    when it's given alone. (Plain classes here, not dataclasses: importing dataclasses
    costs more than the whole parser.)"""

    __slots__ = ("description", "examples", "name", "summary")

    def __init__(self, name: str, summary: str, description: str, examples: str = "") -> None:
        self.name = name
        self.summary = summary
        self.description = description
        self.examples = examples


class Command:
    """One command: the words that name it (``("instance", "list")``), its help, how it
    declares its flags, and the ``module:function`` that runs it, imported only then. The
    function is ``async def f(args, io: Streams) -> int`` and returns the exit code; it
    raises :class:`UsageError` for a bad argument it finds and :class:`CommandError` for
    what fails after (each ``error: <message>``, exit 1)."""

    __slots__ = ("description", "examples", "flag_error", "flags", "handler", "summary", "words")

    def __init__(  # noqa: PLR0917 (the table reads best one field after another)
        self,
        words: tuple[str, ...],
        summary: str,
        description: str,
        examples: str,
        flags: Callable[[argparse.ArgumentParser], None],
        handler: str,
        flag_error: str | None = None,
    ) -> None:
        self.flag_error = flag_error
        """The one message of a bad flag (argparse's otherwise), for commands whose
        upstream words fix it."""
        self.words = words
        self.summary = summary
        self.description = description
        self.examples = examples
        self.flags = flags
        self.handler = handler


GROUPS: Final[tuple[Group, ...]] = (
    Group(
        "instance",
        "show the Instances of an InferenceService's OMENative components",
        "Show the Instances of an InferenceService's OMENative components, as OME records\n"
        "them in the status of each component's InferenceReplica.",
        """\
examples:
  # every Instance of InferenceService chat, and how current the status is
  kubectl ome instance list chat -n prod

  # the revisions OME is retrying or holding for the engine
  kubectl ome instance retry-blocks chat --component engine -n prod

  # one Instance: its recorded row, migrations, live pods and their Warning events
  kubectl ome instance status chat 0 --component engine -n prod

  # what the controller's next pass over the engine would do, and what waits
  kubectl ome instance plan chat --component engine -n prod""",
    ),
    Group(
        "migration",
        "move an Instance to another node; its migrations' status and history (alpha)",
        "Move one OMENative Instance to another node, its replacement serving before the\n"
        "old one drains (alpha; a guarded action).",
        """\
examples:
  # preview, sending nothing
  kubectl ome migration start chat -n prod --component engine --instance 3 \\
      --reason "node-a maintenance" --dry-run client --yes
  kubectl ome migration start chat -n prod --component engine --instance 3 \\
      --reason "node-a maintenance"
  # every migration, ended ones too: status records (AUTH) and the audit ledger (AUDIT)
  kubectl ome migration history chat -n prod
  # every Instance on node-a, within the caps, after one confirmation
  kubectl ome migration drain-node node-a -n prod
  kubectl ome help migration start""",
    ),
    Group(
        "get",
        "list OME's objects (InferenceReplicas, standalone ones included)",
        "List OME's objects as kubectl get does: here the InferenceReplicas, with the\n"
        "InferenceService each belongs to.",
        """\
examples:
  kubectl ome get ir -n prod
  kubectl ome get ir -A""",
    ),
)

_INSTANCE: Final = "omed.cli.kubectl_ome_instance"
_PLAN: Final = "omed.cli.kubectl_ome_plan"

COMMANDS: Final[tuple[Command, ...]] = (
    Command(
        ("instance", "list"),
        "one row per Instance, from the InferenceReplicas' status",
        "One row per Instance of the InferenceService's OMENative components, from the\n"
        "status of their InferenceReplicas, with the evidence of how current it is.",
        """\
examples:
  kubectl ome instance list chat -n prod
  kubectl ome instance list chat -n prod -o yaml
  # one line per Instance, <component>/<index>, for scripts
  kubectl ome instance list chat -n prod -o name
  kubectl ome instance list chat -n prod --no-headers""",
        _list_flags,
        f"{_INSTANCE}:list_command",
    ),
    Command(
        ("instance", "retry-blocks"),
        "the revisions OME is retrying or holding for one component",
        "The revisions that OME is retrying or holding for one component, from its\n"
        "InferenceReplica's status.retryBlocks, and whether release-held may release each.",
        """\
examples:
  kubectl ome instance retry-blocks chat --component engine -n prod
  # each block's full target revision, one a line (what release-held --revision takes)
  kubectl ome instance retry-blocks chat --component engine -n prod -o name""",
        _retry_blocks_flags,
        f"{_INSTANCE}:retry_blocks_command",
    ),
    Command(
        ("instance", "status"),
        "one Instance: its recorded row, migrations, live pods and events",
        "One Instance, INDEX of --component: the row OME recorded, the migrations it takes\n"
        "part in, and its live pods with their Warning events.",
        """\
examples:
  kubectl ome instance status chat 0 --component engine -n prod
  # every field in full, one to a row
  kubectl ome instance status chat 0 --component engine -n prod -o wide""",
        _status_flags,
        "omed.cli.kubectl_ome_status:status_command",
    ),
    Command(
        ("instance", "release-held"),
        "ask OME to try a Held revision again (alpha; a guarded action)",
        "Ask OME to try a Held revision again, once you've fixed its cause (alpha; a guarded\n"
        "action): check, preview, confirm, check again, then set the release annotation.",
        """\
examples:
  # see what would be released, without sending anything
  kubectl ome instance release-held chat --component engine --revision 7f9c4d2b \\
      -n prod --dry-run client
  kubectl ome instance release-held chat --component engine \\
      --revision chat-engine-7f9c4d2b -n prod""",
        _release_flags,
        f"{_INSTANCE}:release_held_command",
    ),
    Command(
        ("instance", "plan"),
        "what the controller's next pass over one component would do (reads only)",
        "What the InferenceReplica controller's next pass over one component would do, and\n"
        "what each Instance waits for: the controller's own planner, run on the objects read\n"
        "from the API server at the current time. It only reads (get and list).",
        """\
examples:
  kubectl ome instance plan chat --component engine -n prod
  # the manager's ConfigMap in another namespace than ome
  kubectl ome instance plan chat --component engine -n prod --manager-namespace ome-system
  kubectl ome instance plan chat --component engine -n prod -o json""",
        _plan_flags,
        f"{_PLAN}:plan_command",
    ),
    Command(
        ("migration", "start"),
        "ask OME to move one Instance to another node (alpha; a guarded action)",
        "Ask OME to move one Instance to another node (alpha; a guarded action): check,\n"
        "preview (stderr), confirm, check again, then add the request annotation\n"
        "ome.io/migration-request-v1-<uuid> to the InferenceService with a JSON patch that\n"
        "tests its uid and resourceVersion. 45 seconds in all, the prompt included.\n"
        "Exit 0 when stored (or dry-run, or a --request-id lookup found the request\n"
        "waiting), 1 for an error or refusal, 3 for a state conflict or a lookup miss.",
        """\
examples:
  # run every check and show the request, without sending it
  kubectl ome migration start chat -n prod --component engine --instance 3 \\
      --reason "node-a maintenance" --dry-run client --yes
  # the API server and OME's webhook check it too
  kubectl ome migration start chat -n prod --component engine --instance 3 \\
      --reason "node-a maintenance" --dry-run server --yes
  # send it, answering y at the prompt
  kubectl ome migration start chat -n prod --component engine --instance 3 \\
      --reason "node-a maintenance" --hint-node node-c,node-d
  # after an unknown outcome: is the request still waiting? (exit 0 yes, 3 no)
  kubectl ome migration start chat -n prod --component engine --instance 3 \\
      --reason "node-a maintenance" --request-id 7c9e6679-7425-40de-944b-e07fc1f90ae7""",
        _migration_start_flags,
        "omed.cli.kubectl_ome_migration:start_command",
        flag_error="invalid migration action flags; use --help",
    ),
    Command(
        ("migration", "status"),
        "the migrations OME records for an InferenceService (alpha)",
        "The migration records in the status of the InferenceService's InferenceReplicas:\n"
        "each request's phase, whether it is Active or Terminal, and whether the status it\n"
        "comes from is Current.",
        """\
examples:
  kubectl ome migration status chat -n prod --component engine
  # every field in full
  kubectl ome migration status chat -n prod -o yaml""",
        _migration_status_flags,
        "omed.cli.kubectl_ome_migration_reports:status_command",
    ),
    Command(
        ("migration", "history"),
        "the migrations of an InferenceService, ended ones too, from status and audit (alpha)",
        "The migrations of the InferenceService from three sources, each row labelled and\n"
        "never merged: AUTH, the records in its InferenceReplicas' status (the only one that\n"
        "says what OME is doing); PARENT, its status.migrationHistory; AUDIT, the rows of the\n"
        "audit ConfigMap <name>-ome-migration-audit, which keeps the last 200 migrations that\n"
        "ended. Every read is bounded; a source that can't be trusted shows its issue, no rows.",
        """\
examples:
  kubectl ome migration history chat -n prod
  kubectl ome migration history chat -n prod --component engine -o wide
  kubectl ome migration history chat -n prod -o json""",
        _migration_history_flags,
        "omed.cli.kubectl_ome_migration_reports:history_command",
    ),
    Command(
        ("migration", "drain-node"),
        "move every OMENative Instance off a node, within OME's caps (alpha; guarded)",
        "Move every OMENative Instance with a pod on NODE to another node (alpha; a guarded\n"
        "action): list them (-n NS, or -A), preview, confirm once, then send one migration\n"
        "request per Instance as the caps allow (never more in flight than lifecycle.audit's\n"
        "maxInFlightMigrations, one per component at a time), each checked and patched as\n"
        "migration start does, follow each to its end and report per Instance. Instances\n"
        "whose component's mode is Never are listed and skipped. Request IDs derive from\n"
        "the node and the Instance, so running it again follows what it already sent.\n"
        "Exit 0 when every Instance moved (or was skipped), 1 when a move failed, ended\n"
        "unknown or ran out of --timeout, 3 when the state refused or deferred one.",
        """\
examples:
  # list what would move, sending nothing
  kubectl ome migration drain-node node-a -n prod --dry-run
  # every namespace, answering y at the prompt
  kubectl ome migration drain-node node-a -A --reason "node-a maintenance"
  # two at a time at most, no prompt, a JSON report
  kubectl ome migration drain-node node-a -n prod --max-in-flight 2 --yes -o json""",
        _migration_drain_flags,
        "omed.cli.kubectl_ome_drain:drain_command",
    ),
    Command(
        ("get", "ir"),
        "every InferenceReplica with its parent InferenceService (- for a standalone one)",
        "Every InferenceReplica of the namespace (-A: of every namespace; NAME...: only\n"
        "those), with the InferenceService it belongs to: PARENT is - for a standalone\n"
        "replica, one that no instance subcommand shows.",
        """\
examples:
  kubectl ome get ir -n prod
  kubectl ome get ir -A
  kubectl ome get ir pool-a -n prod -o yaml
  # one inferencereplica.ome.io/<name> a line, for scripts
  kubectl ome get ir -n prod -o name""",
        _get_ir_flags,
        f"{_PLAN}:get_ir_command",
    ),
    Command(
        ("wait",),
        "block until OME has done something: released a held revision, ended a migration",
        "Block until a condition holds. --for=held-revision=unheld --component C: OME has\n"
        "taken a release-held (the component's InferenceReplica no longer carries the\n"
        "release annotation nor holds the revision). --for=migration=terminal\n"
        "--request-id UUID: the migration of that request ended (Completed, Failed or\n"
        "Relocated; a failed migration still ends the wait: check it with migration\n"
        "status). Exit 0 when it holds, 2 when it didn't within --timeout (default 60s)\n"
        "or the InferenceService was replaced, 1 for an error.",
        """\
examples:
  kubectl ome wait chat --for=held-revision=unheld --component engine \\
      --revision 7f9c4d2b -n prod --timeout=2m
  kubectl ome wait chat -n prod --for=migration=terminal \\
      --request-id=7c9e6679-7425-40de-944b-e07fc1f90ae7 --timeout=30m""",
        _wait_flags,
        f"{_INSTANCE}:wait_command",
    ),
    Command(
        ("version",),
        "print the plugin's version (omed's, the same as omed --version)",
        "Print the plugin's version: omed's, the one omed --version prints.",
        """\
examples:
  kubectl ome version""",
        _version_flags,
        "omed.cli.kubectl_ome:version_command",
    ),
    Command(
        ("completion",),
        "print a shell completion script for kubectl-ome (bash or zsh)",
        "Print a shell completion script for the kubectl-ome command (bash or zsh).\n"
        "kubectl ome ... itself is completed by kubectl's own completion, which asks the\n"
        "kubectl_complete-ome command installed with the plugin (kubectl 1.26 and later).",
        """\
examples:
  # bash: this session, then every session
  source <(kubectl ome completion bash)
  kubectl ome completion bash > /etc/bash_completion.d/kubectl-ome

  # zsh (after compinit)
  source <(kubectl ome completion zsh)""",
        _completion_flags,
        "omed.cli.kubectl_ome:completion_command",
    ),
)

_TOP_EXAMPLES: Final = """\
examples:
  kubectl ome instance list chat -n prod
  kubectl ome instance status chat 0 --component engine -n prod
  # move every OMENative Instance off node-a, within OME's migration caps
  kubectl ome migration drain-node node-a -n prod
  kubectl ome help instance list

Use "kubectl ome COMMAND --help" (or kubectl ome help COMMAND) for a command's flags."""


def _top_words() -> list[str]:
    """The first words of the commands, in table order, each once (groups by their name)."""
    words: list[str] = []
    for command in COMMANDS:
        if command.words[0] not in words:
            words.append(command.words[0])
    return [*words, "help"]


def _group(name: str) -> Group | None:
    return next((group for group in GROUPS if group.name == name), None)


def build_parser() -> _Parser:
    """The whole command tree, from :data:`COMMANDS` and :data:`GROUPS`."""
    parser = _Parser(
        prog=PROGRAM,
        description="OME's kubectl plugin: the Instances of OMENative InferenceServices.",
        epilog=_TOP_EXAMPLES,
    )
    parser.add_argument(
        "--version", action="store_true", help="print the version (as kubectl ome version)"
    )
    top = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    containers: dict[tuple[str, ...], Any] = {(): top}
    for command in COMMANDS:
        for depth in range(1, len(command.words)):
            path = command.words[:depth]
            if path in containers:
                continue
            group = _group(path[-1])
            if group is None:
                raise AssertionError(f"command {' '.join(command.words)} has no group {path}")
            group_parser = containers[path[:-1]].add_parser(
                group.name,
                help=group.summary,
                description=group.description,
                epilog=group.examples or None,
            )
            group_parser.set_defaults(group=path)
            containers[path] = group_parser.add_subparsers(
                dest="_".join(("sub", *path)), metavar="SUBCOMMAND", parser_class=_Parser
            )
        sub = containers[command.words[:-1]].add_parser(
            command.words[-1],
            help=command.summary,
            description=command.description,
            epilog=command.examples,
        )
        command.flags(sub)
        sub.set_defaults(run=command)
    help_command = top.add_parser("help", help="help about any command")
    help_command.add_argument("topic", nargs="*", metavar="COMMAND")
    help_command.set_defaults(help_topic=True)
    return parser


def _subparser(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.ArgumentParser:
    for word in words:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = actions[0].choices[word]
    return parser


def _check_words(argv: Sequence[str]) -> None:
    """Name a command this build doesn't have before argparse does (its wording varies by
    Python version): ``unknown command "X" for "kubectl ome"``."""
    words = [word for word in argv if not word.startswith("-")]
    if not words or argv[0].startswith("-"):
        return
    known = _top_words()
    if words[0] not in known:
        raise UsageError(
            f'unknown command "{words[0]}" for "{PROGRAM}": this build has '
            f"{_and(known)} (kubectl ome --help lists them)"
        )
    if words[0] == "help":
        return
    subcommands = [c.words[1] for c in COMMANDS if len(c.words) > 1 and c.words[0] == words[0]]
    if subcommands and len(words) > 1 and words[1] not in subcommands:
        raise UsageError(
            f'unknown subcommand "{words[1]}" for "{PROGRAM} {words[0]}": {words[1]} is not '
            f"a subcommand (this build has {_and(subcommands)})"
        )


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


class Streams:
    """Where a run reads and writes (the terminal, or a test's buffers), its clocks, and
    release-held's budget: ``now`` is the wall clock (epoch seconds), for the times in
    status; ``budget`` the seconds release-held has in all, the prompt's wait included,
    ``None`` for its own :data:`~omed.cli.release_held.BUDGET_SECONDS` (45; shorter in
    tests)."""

    __slots__ = ("budget", "err", "monotonic", "now", "out", "stdin")

    def __init__(
        self,
        *,
        out: TextIO,
        err: TextIO,
        stdin: TextIO,
        now: Callable[[], float],
        monotonic: Callable[[], float],
        budget: float | None = None,
    ) -> None:
        self.out = out
        self.err = err
        self.stdin = stdin
        self.now = now
        self.monotonic = monotonic
        self.budget = budget


def _handler(command: Command) -> Callable[[argparse.Namespace, Streams], Awaitable[int]]:
    module, _, name = command.handler.partition(":")
    from omed.kube import defer_client_imports  # before the command imports any library

    defer_client_imports()
    function: Callable[[argparse.Namespace, Streams], Awaitable[int]] = getattr(
        importlib.import_module(module), name
    )
    return function


def _help(parser: _Parser, topic: Sequence[str], out: TextIO) -> int:
    try:
        target = _subparser(parser, topic)
    except (KeyError, IndexError):
        raise UsageError(
            f'unknown help topic "{" ".join(topic)}": kubectl ome --help lists the commands'
        ) from None
    out.write(target.format_help())
    return EXIT_OK


def _version(out: TextIO) -> int:
    """omed's :data:`~omed.version.VERSION`, the one version ``omed --version`` and the
    build-info metric print."""
    from omed.version import VERSION

    out.write(f"{EXECUTABLE} {VERSION}\n")
    return EXIT_OK


async def version_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome version``."""
    del args
    return _version(io.out)


async def completion_command(args: argparse.Namespace, io: Streams) -> int:
    """``kubectl ome completion bash|zsh``: argcomplete's script for ``kubectl-ome``."""
    from argcomplete.shell_integration import shellcode

    io.out.write(shellcode([EXECUTABLE], shell=args.shell))
    return EXIT_OK


def _start(argv: Sequence[str], io: Streams) -> int | Awaitable[int]:
    """Parse ``argv``: the exit code of what needs no event loop (help, the version, a
    usage error), else the command's coroutine, its module imported now."""
    parser = build_parser()
    try:
        _check_words(argv)
        try:
            args = parser.parse_args(list(argv))
        except HelpShown as shown:
            io.out.write(shown.parser.format_help())
            return EXIT_OK
        if args.version:
            return _version(io.out)
        if getattr(args, "help_topic", False):
            return _help(parser, args.topic, io.out)
        command: Command | None = getattr(args, "run", None)
        if command is None:  # bare kubectl ome, or a group without its subcommand
            return _help(parser, getattr(args, "group", ()), io.out)
        return _handler(command)(args, io)
    except UsageError as exc:
        io.err.write(f"error: {_flag_error(argv) or exc}\n")
        return EXIT_ERROR


def _flag_error(argv: Sequence[str]) -> str | None:
    """The fixed message of a bad flag of a command that has one (migration start's)."""
    words = tuple(word for word in argv if not word.startswith("-"))
    for command in COMMANDS:
        if command.flag_error and words[: len(command.words)] == command.words:
            return command.flag_error
    return None


async def _finish(work: Awaitable[int], err: TextIO) -> int:
    """A command's exit code; an error is one ``error: <message>`` line and exit 1."""
    try:
        return await work
    except CommandError as exc:
        err.write(f"error: {exc}\n")
        return exc.exit_code
    except UsageError as exc:
        err.write(f"error: {exc}\n")
    except Exception as exc:  # an unreachable server, a credential plugin that fails
        err.write(f"error: {type(exc).__name__}: {' '.join(str(exc).split())}\n")
    return EXIT_ERROR


def _streams(
    out: TextIO | None,
    err: TextIO | None,
    stdin: TextIO | None,
    now: float | None,
    budget: float | None,
) -> Streams:
    return Streams(
        out=out or sys.stdout,
        err=err or sys.stderr,
        stdin=stdin or sys.stdin,
        now=time.time if now is None else (lambda: now),
        monotonic=time.monotonic,
        budget=budget,
    )


async def run(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    stdin: TextIO | None = None,
    now: float | None = None,
    budget: float | None = None,
) -> int:
    """Run the plugin in-process; returns the exit code. ``now`` (epoch seconds) fixes the
    clock that retry-blocks and release-held judge times against; ``stdin`` answers
    release-held's prompt; ``budget`` is the seconds release-held has in all (by default its
    own, 45; tests shorten it)."""
    io = _streams(out, err, stdin, now, budget)
    started = _start(argv, io)
    return started if isinstance(started, int) else await _finish(started, io.err)


def _complete_parser() -> _Parser:
    """The parser, with argcomplete's completers where the flags want them."""
    from argcomplete.completers import FilesCompleter

    parser = build_parser()
    stack: list[argparse.ArgumentParser] = [parser]
    while stack:
        current = stack.pop()
        for action in current._actions:
            if getattr(action, "completer", None) == _FILES:
                action.completer = FilesCompleter()  # type: ignore[attr-defined]
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
    return parser


def _autocomplete() -> None:
    """Answer argcomplete's shell script (``_ARGCOMPLETE`` is set) and exit."""
    import argcomplete
    from argcomplete.completers import SuppressCompleter

    argcomplete.autocomplete(
        _complete_parser(), always_complete_options=False, default_completer=SuppressCompleter()
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: ``sys.exit(main())``. The event loop (and asyncio's import)
    starts only for a command that has work to do."""
    if argv is None and "_ARGCOMPLETE" in os.environ:
        _autocomplete()
    io = _streams(None, None, None, None, None)
    started = _start(sys.argv[1:] if argv is None else argv, io)
    if isinstance(started, int):
        return started
    import asyncio

    return asyncio.run(_finish(started, io.err))


NO_FILE_COMPLETION: Final = 4
"""Cobra's ``ShellCompDirectiveNoFileComp``: the shell offers no file names."""
DEFAULT_DIRECTIVE: Final = 0
"""Cobra's ``ShellCompDirectiveDefault``: with no candidates, the shell offers file names."""


def complete(words: Sequence[str]) -> list[str]:
    """What ``kubectl_complete-ome`` prints for ``kubectl ome WORDS...``: the candidates for
    the last word (``""`` for a new one), one a line as ``value`` or ``value<TAB>help``, then
    cobra's directive line, ``:4`` (no file names) or ``:0`` where a path is wanted."""
    import io as stringio
    import shlex

    from argcomplete import io as argcomplete_io
    from argcomplete.completers import SuppressCompleter
    from argcomplete.finders import CompletionFinder

    words = list(words) or [""]
    *before, current = words
    line = " ".join([EXECUTABLE, *(shlex.quote(w) for w in before), shlex.quote(current)])
    if current == "":
        line = " ".join([EXECUTABLE, *(shlex.quote(w) for w in before)]) + " "
    saved = dict(os.environ)
    os.environ.update(
        {
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_SHELL": "fish",  # fish: no escaping, "value<TAB>description"
            "_ARGCOMPLETE_SUPPRESS_SPACE": "1",
            "_ARGCOMPLETE_DFS": "\t",
            "_ARGCOMPLETE_IFS": "\n",
            "_ARGCOMPLETE_COMP_WORDBREAKS": " ",
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
        }
    )

    class Finder(CompletionFinder):
        def _init_debug_stream(self) -> None:
            # argcomplete's own takes descriptor 9 (its shell script's debug stream) and
            # closes it later: here that may be any file of the process's.
            argcomplete_io.debug_stream = sys.stderr

    buffer = stringio.StringIO()
    finder = Finder()
    try:
        finder(
            _complete_parser(),
            always_complete_options=False,  # flags once a "-" is typed, as cobra offers them
            exit_method=lambda code: None,
            output_stream=buffer,
            default_completer=SuppressCompleter(),
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    candidates = [c.rstrip("\t") for c in buffer.getvalue().split("\n") if c]
    wants_path = (before and before[-1] == "--kubeconfig") or current.startswith("--kubeconfig=")
    directive = DEFAULT_DIRECTIVE if wants_path else NO_FILE_COMPLETION
    return [*candidates, f":{directive}"]


def complete_main() -> int:
    """The ``kubectl_complete-ome`` console script: kubectl (1.26 and later) runs it, found
    on the PATH, with the words after ``kubectl ome`` when the user presses TAB."""
    sys.stdout.write("".join(line + "\n" for line in complete(sys.argv[1:])))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
