"""``omed`` and ``python -m omed``: the controller manager's entry point.

Why a separate, thin module: ``--help`` and a bad flag must answer at once, so the flags
are parsed (and the process may exit 2, or 0 for help, with Go's exact text) before the
manager's heavier imports (aiohttp, the API client, the controllers) are loaded. Then the
log is set up from the ``--zap-*`` flags, the leader election timing is checked (``Invalid
leader election timing``, exit 1), and :func:`omed.manager.process.run` takes over on uvloop when
it is installed.

Invariant: :func:`main` returns the exit code and never raises ``SystemExit`` itself;
0 after help or an ordered stop, 1 for a bad configuration or a failed manager, 2 for bad
flags.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from omed import log as omed_log
from omed.config import (
    INVALID_LEADER_ELECTION_TIMING,
    LeaderElectionTimingError,
    check_leader_election_timing,
    parse_flags_or_exit,
)
from omed.config.flag_values import ZapLevel

__all__ = ["main"]


def _log_level(level: ZapLevel) -> int:
    from omed.manager.startup import log_level

    return log_level(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the manager with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    try:
        options = parse_flags_or_exit(args, env)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    omed_log.setup(encoder=options.zap_encoder, level=_log_level(options.zap_log_level))
    try:
        check_leader_election_timing(options)
    except LeaderElectionTimingError as err:
        logging.getLogger("setup").error(
            INVALID_LEADER_ELECTION_TIMING, extra=omed_log.kv(error=str(err))
        )
        return 1

    from omed.manager.process import run
    from omed.manager.startup import run_loop

    return run_loop(run(options, env=env))


if __name__ == "__main__":
    sys.exit(main())
