"""One request, one deadline: the retries of ``KubeClient.request`` never outlast it.

Pure: the client's HTTP session (its transport seam, ``KubeClient._http``) is a double that
answers from a script and records, on the fake clock, when each try was sent and the
timeout it was given. Time is a :class:`FakeClock` that records what the client slept: the
retry waits must be taken on the injected clock, so these tests never sleep. (The same
deadline against the real API server, answering 429 through API Priority and Fairness:
tests/integration/kube/test_client_deadline.py.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from omed.clock import FakeClock
from omed.kube.client import ClusterConfig, KubeClient
from omed.kube.errors import ServerError, TooManyRequests, Unauthorized

T = TypeVar("T")

CLUSTER = ClusterConfig(host="https://api.invalid", ssl_context=False)
PATH = "/api/v1/namespaces/ns/configmaps"
REFUSED = b'{"kind":"Status","reason":"TooManyRequests","message":"too many requests"}'
LISTED = b'{"kind":"ConfigMapList","items":[],"metadata":{}}'


class Clock(FakeClock):
    """A FakeClock that remembers each sleep asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await super().sleep(seconds)


class Answer:
    def __init__(self, status: int, retry_after: str | None, body: bytes) -> None:
        self.status = status
        self.headers = {} if retry_after is None else {"Retry-After": retry_after}
        self._body = body

    async def read(self) -> bytes:
        return self._body


class Session:
    """Answers each try with the next of ``script`` (the last one again when it runs out):
    ``(status, Retry-After)``, or an exception to raise. Records when each try was sent,
    on the fake clock, and its total timeout."""

    def __init__(self, clock: FakeClock, script: list[tuple[int, str | None] | Exception]):
        self.clock = clock
        self.script = script
        self.sent_at: list[float] = []
        self.timeouts: list[float | None] = []

    @asynccontextmanager
    async def request(self, method: str, url: str, **options: Any) -> AsyncIterator[Answer]:
        self.sent_at.append(self.clock.monotonic() - START)
        self.timeouts.append(options["timeout"].total)
        step = self.script[min(len(self.sent_at), len(self.script)) - 1]
        if isinstance(step, Exception):
            raise step
        status, retry_after = step
        yield Answer(status, retry_after, LISTED if status < 400 else REFUSED)


START = FakeClock().monotonic()


def client_with(
    script: list[tuple[int, str | None] | Exception],
    *,
    cluster: ClusterConfig = CLUSTER,
    **options: Any,
) -> tuple[KubeClient, Session, Clock]:
    clock = Clock()
    assert clock.monotonic() == START
    options.setdefault("qps", 0)  # no limiter waits unless a test asks for them
    client = KubeClient(cluster, clock=clock, **options)
    session = Session(clock, script)
    client._http = lambda: session  # type: ignore[assignment,method-assign,return-value]
    return client, session, clock


async def run(clock: FakeClock, work: Awaitable[T], *, step: float = 0.25, limit: float = 900) -> T:
    """Await ``work`` while moving the fake clock on in small steps, up to ``limit`` seconds
    of it (a request that sleeps on the loop's clock instead never finishes here)."""
    task = asyncio.ensure_future(work)
    moved = 0.0
    while not task.done():
        for _ in range(5):
            await asyncio.sleep(0)
        if task.done():
            break
        if moved >= limit:
            task.cancel()
            raise AssertionError(
                f"the request was still pending after {moved:.0f}s of the injected clock"
            )
        clock.advance(step)
        moved += step
    return task.result()


def elapsed(clock: FakeClock) -> float:
    return clock.monotonic() - START


async def test_a_request_answered_429_forever_fails_at_its_deadline() -> None:
    """The fault: every answer is ``429`` with ``Retry-After: 3600``. Before, each wait was
    60 s and there were ten of them (eleven tries, ten minutes, on the loop's clock); now
    the request has one deadline, 60 s by default, and no wait runs past it."""
    client, session, clock = client_with([(429, "3600")])
    with pytest.raises(TooManyRequests) as caught:
        await run(clock, client.request("GET", PATH))
    # Waits of 30 s (the cap), taken on the injected clock; the second would end at the
    # deadline, when no try could be made any more, so the request fails then, not later.
    assert clock.slept == [30.0]
    assert session.sent_at == [0.0, 30.0]
    assert elapsed(clock) <= 30.0 + 0.25
    message = str(caught.value)
    assert "60s deadline" in message, message
    assert "429 TooManyRequests: too many requests" in message, message
    assert "Retry-After: 3600" in message, message
    assert "2 tries" in message, message
    assert caught.value.retry_after == 30.0  # still what the informers wait on


async def test_the_deadline_is_configurable_per_call_and_per_client() -> None:
    client, session, clock = client_with([(429, "2")], deadline=7.0)
    with pytest.raises(TooManyRequests, match=r"the request's 7s deadline"):
        await run(clock, client.request("GET", PATH))
    # The fourth answer, at 6 s, asks for 2 s more: that would end past 7 s.
    assert session.sent_at == [0.0, 2.0, 4.0, 6.0]
    assert elapsed(clock) <= 6.0 + 0.25

    client, session, clock = client_with([(429, "2")], deadline=7.0)
    with pytest.raises(TooManyRequests, match=r"the request's 5s deadline"):
        await run(clock, client.request("GET", PATH, deadline=5.0))
    assert session.sent_at == [0.0, 2.0, 4.0]
    assert sum(clock.slept) <= 5.0


async def test_each_try_gets_at_most_the_time_left() -> None:
    """A try's own timeout (30 s by default) is cut to what is left of the deadline."""
    client, session, clock = client_with([(503, "2"), (503, "2"), (200, None)])
    assert await run(clock, client.request("GET", PATH, deadline=5.0)) == {
        "kind": "ConfigMapList",
        "items": [],
        "metadata": {},
    }
    assert session.sent_at == [0.0, 2.0, 4.0]
    assert session.timeouts == pytest.approx([5.0, 3.0, 1.0])
    assert clock.slept == [2.0, 2.0]


async def test_a_try_cut_short_by_the_deadline_names_the_deadline_and_the_last_answer() -> None:
    client, session, clock = client_with([(503, "2"), TimeoutError()])
    with pytest.raises(ServerError) as caught:
        await run(clock, client.request("GET", PATH, deadline=5.0))
    message = str(caught.value)
    assert re.search(r"no answer to try 2 within the request's 5s deadline", message), message
    assert "503" in message, message
    assert session.timeouts == pytest.approx([5.0, 3.0])


async def test_a_first_try_cut_short_by_the_deadline_is_a_timeout_naming_it() -> None:
    client, session, clock = client_with([TimeoutError()])
    with pytest.raises(TimeoutError, match=r"no answer within the request's 5s deadline"):
        await run(clock, client.request("GET", PATH, deadline=5.0))
    assert session.timeouts == [5.0]


async def test_a_try_s_own_timeout_is_not_the_deadline() -> None:
    """A try that ran out of its own timeout (not the deadline) fails as it always did."""
    client, session, clock = client_with([TimeoutError("its own")], timeout=10.0)
    with pytest.raises(TimeoutError, match="its own"):
        await run(clock, client.request("GET", PATH, deadline=60.0))
    assert session.timeouts == [10.0]


async def test_the_deadline_never_shortens_a_longer_per_try_timeout_by_default() -> None:
    """A client built with a long per-try timeout (``kubectl ome --request-timeout 120``)
    gets a deadline at least that long unless one is given."""
    client, session, clock = client_with([(200, None)], timeout=120.0)
    await run(clock, client.request("GET", PATH))
    assert session.timeouts == [120.0]


async def test_a_retry_held_in_the_limiter_past_the_deadline_is_not_sent() -> None:
    """The first try's wait in the rate limiter is outside the deadline (client-go: a
    throttled client must not time out before sending anything); a retry's is inside."""
    client, session, clock = client_with([(429, "0")], qps=0.1, burst=1)
    await client.limiter.wait()  # someone else took the one token: 10 s to the next
    with pytest.raises(TooManyRequests, match=r"the request's 5s deadline"):
        await run(clock, client.request("GET", PATH, deadline=5.0))
    assert session.sent_at == [10.0]  # sent after 10 s in the limiter; the retry never was
    assert clock.slept == [10.0]


async def test_max_retries_still_ends_a_request_inside_its_deadline() -> None:
    client, session, clock = client_with([(429, "0")])
    with pytest.raises(TooManyRequests) as caught:
        await run(clock, client.request("GET", PATH))
    assert len(session.sent_at) == 11  # client-go's ten retries
    assert "deadline" not in str(caught.value)


async def test_retry_waits_are_taken_on_the_injected_clock() -> None:
    client, session, clock = client_with([(429, "1"), (503, "3"), (200, None)])
    await run(clock, client.request("GET", PATH))
    assert clock.slept == [1.0, 3.0]
    assert session.sent_at == [0.0, 1.0, 4.0]


class SlowPlugin:
    """Credentials whose refresh after a 401 takes ``seconds`` of the clock (an exec
    plugin that is slow to answer) and hands out a new token."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds
        self.token = "first"

    async def authorization(self) -> str | None:
        return self.token

    async def refresh_after_unauthorized(self, refused: str | None) -> bool:
        await self.clock.sleep(self.seconds)
        self.token = "second"
        return True


async def test_a_401_resent_after_the_deadline_is_not_sent() -> None:
    client, session, clock = client_with([(401, None), (200, None)])
    plugin = SlowPlugin(clock, seconds=10.0)
    client.config = dataclasses.replace(CLUSTER, credentials=plugin)
    with pytest.raises(Unauthorized, match=r"no time left for another try, past the request's 5s"):
        await run(clock, client.request("GET", PATH, deadline=5.0))
    assert session.sent_at == [0.0]

    client, session, clock = client_with([(401, None), (200, None)])
    client.config = dataclasses.replace(CLUSTER, credentials=SlowPlugin(clock, seconds=1.0))
    assert await run(clock, client.request("GET", PATH, deadline=5.0)) is not None
    assert session.sent_at == [0.0, 1.0]  # sent once more, inside the deadline


@pytest.mark.parametrize("deadline", [0.0, -1.0, float("nan")])
def test_a_deadline_must_be_positive(deadline: float) -> None:
    with pytest.raises(ValueError, match="deadline must be a positive number"):
        KubeClient(CLUSTER, deadline=deadline)
