"""Creates in flight that the Service and PodDisruptionBudget caches haven't shown yet, per
InferenceReplica.

Why: a pass decides from the caches, which lag the API server. A pass that creates Service
``x`` and is followed at once by another (a pod event woke the key before the Service's own
add event reached the cache) would see ``x`` missing and create it again, meet
``AlreadyExists``, and report a name it holds itself as taken. So each create is first
*expected* here; a pass treats an expected name as being created (no second create, nothing
reported) until the cache shows an object of that name, or the expectation expires. This is
the creations half of the expectations controller-runtime users and OpenKruise keep (and of
the InferenceReplica controller's pod expectations), narrowed to what a name says: the rest
of the pass goes on, since every other write is of an object the cache does show.

Invariants:

* an expectation is recorded *before* its request is sent, and lowered when the request
  fails (nothing will be observed: ``AlreadyExists`` is then a name the label-scoped cache
  can't show, reported as taken);
* an expectation expires ``timeout`` after the API server accepted its request (or after it
  was recorded, when no answer came), so a lost watch event costs one timeout, never a
  component whose object is missing for good;
* an expectation is met when a pass finds the name in the cache (:meth:`outstanding`): the
  cache is the one place that says what the next decision will see;
* everything runs on the event loop; no method awaits.
"""

from __future__ import annotations

from collections.abc import Callable

from omed.clock import Clock
from omed.controllers.serving.core.actions import Kind

DEFAULT_TIMEOUT = 60.0
"""Seconds after which an unobserved create stops holding its name back."""

Name = tuple[Kind, str]


class CreateExpectations:
    """Unobserved creates per InferenceReplica key; see the module docstring."""

    def __init__(self, *, clock: Clock, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._pending: dict[str, dict[Name, float]] = {}

    def expect(self, key: str, name: Name) -> None:
        """A create of ``name`` is about to be sent."""
        self._pending.setdefault(key, {})[name] = self._clock.monotonic()

    def sent(self, key: str, name: Name) -> None:
        """The API server accepted the create just now: its timeout counts from here."""
        entry = self._pending.get(key)
        if entry is not None and name in entry:
            entry[name] = self._clock.monotonic()

    def failed(self, key: str, name: Name) -> None:
        """The create was answered with an error: nothing will be observed."""
        entry = self._pending.get(key)
        if entry is not None:
            entry.pop(name, None)
            if not entry:
                del self._pending[key]

    def outstanding(self, key: str, shown: Callable[[Name], bool]) -> frozenset[Name]:
        """The names of ``key`` still being created: those neither ``shown`` by the cache nor
        expired. The others are forgotten."""
        entry = self._pending.get(key)
        if entry is None:
            return frozenset()
        oldest = self._clock.monotonic() - self._timeout
        for name, at in list(entry.items()):
            if at <= oldest or shown(name):
                del entry[name]
        if not entry:
            del self._pending[key]
            return frozenset()
        return frozenset(entry)

    def remaining(self, key: str) -> float:
        """Seconds until the last of ``key``'s expectations expires (0 when none is left)."""
        entry = self._pending.get(key)
        if not entry:
            return 0.0
        return max(0.0, self._timeout - (self._clock.monotonic() - max(entry.values())))

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
