"""``ome-status-preflight``: check a fleet before and after a switch of the Instance status
encoding, and repair a damaged status.

Why: the tool's flags, report lines and exit codes are an interface operators script
against, and this module is its entry point: the flags, the exit codes
and where each line goes. The work is elsewhere: the inventory in
:mod:`omed.cli.preflight_inventory`, the read-only checks in :mod:`omed.cli.preflight_checks`,
the report in :mod:`omed.cli.preflight_report`, the repair in :mod:`omed.cli.preflight_repair`.

Usage::

    ome-status-preflight --inventory fleet.yaml [--json]
    ome-status-preflight repair --inventory fleet.yaml --cluster NAME --namespace NS \\
        --name NAME --replacement rows.yaml [--apply]

Invariants (exit codes):

* the check exits 0 when every cluster is GO, 1 when any is NO-GO (an unreachable cluster is
  NO-GO, never a crash), 2 on a bad flag or a bad inventory (``error: ...`` on stderr);
* repair exits 0 after a dry run or a write, 1 on a refusal (``refused: ...``, nothing written),
  2 on any other error (``error: ...``), whatever raised it: a bad flag (an empty or malformed
  ``--namespace`` or ``--name`` included), a bad inventory or replacement file, an API error,
  an unreachable cluster, a local file or credential plugin that fails, an answer that isn't
  a JSON object. Only a refusal exits 1.

Reports go to stdout, ``error:`` and ``refused:`` lines to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from omed.cli.preflight_checks import ClusterReport, check_cluster, one_line
from omed.cli.preflight_inventory import Inventory, InventoryError, load_inventory
from omed.cli.preflight_repair import (
    BeforeWrite,
    RepairError,
    RepairRefused,
    check_name,
    check_namespace,
    load_replacement,
    run_repair,
)
from omed.cli.preflight_report import (
    EXIT_GO,
    EXIT_NO_GO,
    EXIT_USAGE,
    exit_code,
    json_report,
    text_report,
)

__all__ = ["PROGRAM", "UsageError", "check_fleet", "main", "run"]

PROGRAM = "ome-status-preflight"
DEFAULT_TIMEOUT = 30.0


class UsageError(Exception):
    """A bad flag: ``error: <message>`` and exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing its own text and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _with_timeout(parser: _Parser) -> _Parser:
    """``parser`` with the last flag both commands take: each API request's timeout."""
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=DEFAULT_TIMEOUT,
        help="seconds to wait for each API request (default 30)",
    )
    return parser


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"--timeout must be a positive number, got {text}")
    return value


def _flag_type(check: Callable[[str], str]) -> Callable[[str], str]:
    """An argparse ``type`` from a check that raises :class:`ValueError` with its message."""

    def parse(text: str) -> str:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _check_parser() -> _Parser:
    parser = _Parser(
        prog=PROGRAM,
        description="Check that every cluster of an inventory is ready for its OMENative "
        "status settings (GO or NO-GO). Reads only.",
        allow_abbrev=False,
        epilog=f"Subcommand: {PROGRAM} repair --help",
    )
    parser.add_argument("--inventory", required=True, type=Path, help="the inventory YAML file")
    parser.add_argument("--json", action="store_true", help="print a machine-readable report")
    return _with_timeout(parser)


def _repair_parser() -> _Parser:
    parser = _Parser(
        prog=f"{PROGRAM} repair",
        description="Replace one damaged InferenceReplica's rows with rows you write, keeping "
        "the rest of its status. Without --apply, nothing is written.",
        allow_abbrev=False,
    )
    parser.add_argument("--inventory", required=True, type=Path, help="the inventory YAML file")
    parser.add_argument("--cluster", required=True, help="the cluster's name in the inventory")
    parser.add_argument(
        "--namespace",
        required=True,
        type=_flag_type(check_namespace),
        help="the InferenceReplica's namespace",
    )
    parser.add_argument(
        "--name", required=True, type=_flag_type(check_name), help="the InferenceReplica's name"
    )
    parser.add_argument(
        "--replacement",
        required=True,
        type=Path,
        help="a YAML file with one key, instanceStatuses: a row for every Instance",
    )
    parser.add_argument("--apply", action="store_true", help="write (default: a dry run)")
    return _with_timeout(parser)


async def check_fleet(
    inventory: Inventory, *, timeout: float = DEFAULT_TIMEOUT
) -> list[ClusterReport]:
    """Every cluster of the inventory checked concurrently, reported in inventory order."""
    return list(
        await asyncio.gather(
            *(
                check_cluster(cluster, inventory=inventory, timeout=timeout)
                for cluster in inventory.clusters
            )
        )
    )


def _load(path: Path, err: TextIO) -> Inventory | None:
    try:
        return load_inventory(path)
    except InventoryError as exc:
        # A file that can't be read or parsed is named by its message already.
        prefix = "error: " if exc.names_file else f"error: inventory {path}: "
        for message in exc.messages:
            err.write(f"{prefix}{message}\n")
        return None


async def _run_check(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    inventory = _load(args.inventory, err)
    if inventory is None:
        return EXIT_USAGE
    reports = await check_fleet(inventory, timeout=args.timeout)
    out.write(json_report(inventory, reports) if args.json else text_report(inventory, reports))
    return exit_code(reports)


async def _run_repair(
    args: argparse.Namespace, *, out: TextIO, err: TextIO, before_write: BeforeWrite | None
) -> int:
    inventory = _load(args.inventory, err)
    if inventory is None:
        return EXIT_USAGE
    try:
        rows = load_replacement(args.replacement)
        report = await run_repair(
            inventory=inventory,
            cluster_name=args.cluster,
            namespace=args.namespace,
            name=args.name,
            rows=rows,
            apply=args.apply,
            before_write=before_write,
            timeout=args.timeout,
        )
    except RepairRefused as exc:
        err.write(f"refused: {exc}\n")
        return EXIT_NO_GO
    except RepairError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    except Exception as exc:  # never a traceback, and never exit 1 (a refusal's code)
        err.write(f"error: the repair stopped: {type(exc).__name__}: {one_line(exc)}\n")
        return EXIT_USAGE
    out.write(report)
    return EXIT_GO


async def run(
    argv: Sequence[str],
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    before_write: BeforeWrite | None = None,
) -> int:
    """Run the tool in-process; returns the exit code. ``before_write`` (repair ``--apply``
    only) runs between the read and the write."""
    out = out or sys.stdout
    err = err or sys.stderr
    arguments = list(argv)
    repair = bool(arguments) and arguments[0] == "repair"
    parser = _repair_parser() if repair else _check_parser()
    try:
        args = parser.parse_args(arguments[1:] if repair else arguments)
    except UsageError as exc:
        err.write(f"error: {exc}\n")
        err.write(parser.format_usage())
        return EXIT_USAGE
    except SystemExit as exc:  # --help printed its text
        return exc.code if isinstance(exc.code, int) else EXIT_GO
    if repair:
        return await _run_repair(args, out=out, err=err, before_write=before_write)
    return await _run_check(args, out=out, err=err)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: ``sys.exit(main())``."""
    return asyncio.run(run(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
