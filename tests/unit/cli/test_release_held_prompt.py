"""release-held's prompt, in-process: the default budget, and ``read_line``, which waits for
a line on stdin's descriptor at most its timeout, whatever stdin does (a silent pipe, bytes
without a newline, a regular file, ``/dev/null``). No thread is left behind, so these can't
hang the session. The plugin as a real process against the real API server (a pipe held open
and silent, a trickling pipe, a terminal nobody types at, a slow answer that confirms) is in
tests/integration/cli/test_release_held_process.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from omed.cli import kubectl_ome, kubectl_ome_instance, release_held


def test_the_budget_is_45_seconds_by_default() -> None:
    assert release_held.BUDGET_SECONDS == 45.0
    # run's default (None) is release-held's own budget.
    assert inspect.signature(kubectl_ome.run).parameters["budget"].default is None
    assert kubectl_ome_instance.out_of_time(45.0) == (
        "release-held ran out of its 45 s; nothing changed. Run kubectl ome instance "
        "retry-blocks before you try again"
    )


@contextlib.contextmanager
def pipe() -> Iterator[tuple[TextIO, int]]:
    """A pipe's read end as a text stream, and its write end's descriptor."""
    reader, writer = os.pipe()
    stream = os.fdopen(reader, "r", encoding="utf-8")
    try:
        yield stream, writer
    finally:
        stream.close()
        with contextlib.suppress(OSError):
            os.close(writer)


async def test_read_line_gives_up_on_a_silent_pipe_or_a_line_without_its_end() -> None:
    threads = threading.active_count()
    with pipe() as (stream, writer):
        assert await kubectl_ome_instance.read_line(stream, timeout=0.05) is None
        os.write(writer, b"ye")
        assert await kubectl_ome_instance.read_line(stream, timeout=0.05) is None
    assert threading.active_count() == threads


async def test_read_line_reads_a_line_in_pieces_or_up_to_the_end_of_input() -> None:
    with pipe() as (stream, writer):
        reading = asyncio.create_task(kubectl_ome_instance.read_line(stream, timeout=5))
        os.write(writer, b"y")
        await asyncio.sleep(0.01)
        os.write(writer, "es \u00e9\nmore\n".encode())
        assert await reading == "yes \u00e9"
    with pipe() as (stream, writer):
        os.write(writer, b"y")
        os.close(writer)
        assert await kubectl_ome_instance.read_line(stream, timeout=5) == "y"
    with pipe() as (stream, writer):
        os.close(writer)
        assert await kubectl_ome_instance.read_line(stream, timeout=5) == ""


async def test_read_line_reads_what_never_blocks_directly(tmp_path: Path) -> None:
    assert await kubectl_ome_instance.read_line(io.StringIO("yes\n"), timeout=0) == "yes\n"
    answers = tmp_path / "answers"
    answers.write_text("y\n")
    with answers.open() as stream:  # epoll refuses regular files
        assert await kubectl_ome_instance.read_line(stream, timeout=0) == "y\n"
    devnull = tmp_path.parent / os.devnull  # an absolute path: this is /dev/null
    with devnull.open() as stream:
        assert await kubectl_ome_instance.read_line(stream, timeout=0) == ""
