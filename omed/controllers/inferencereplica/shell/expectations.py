"""Writes in flight that the pod cache hasn't shown yet, per InferenceReplica.

Why: the planner reads the pod cache, which lags the API server. Right after a pass creates
pod ``x-3-default-0``, a second pass on a stale cache would see it missing and create it
again (harmless thanks to fixed names, but it would also count it against a second batch),
and right after a delete it would see the pod still live. So every pod write the executor
sends is first *expected* here, and the informer's events *observe* it; until a key's
expectations are met (or expire), the controller doesn't plan for that key. This is
controller-runtime's and OpenKruise's ``expectations``, keyed per InferenceReplica.

Three kinds: creations (by pod name: seen once a pod of that name is in the cache),
deletions (by uid: seen once the pod is Terminating or gone), and serving-gate writes (by
uid: seen once the cached pod shows that gate value, or is gone).

The InferenceReplica itself gets the same treatment for the controller's own writes
(finalizer, status): a write based on resourceVersion R makes R stale, and a pass planned on
a cache still at R would only meet a Conflict. :meth:`Expectations.expect_replica_past`
records R; :meth:`Expectations.replica_current` says whether the cache moved past it.

Invariants:

* an expectation is recorded *before* its request is sent, and lowered when the request
  fails in a way that means nothing will be observed (AlreadyExists, NotFound, refusal);
* each expectation expires ``timeout`` after its own write: from when it was recorded, and
  again from when the API server answered the request (:meth:`Expectations.sent`; a write
  may wait in the client's limiter long after it was expected). A key is satisfied once each
  of its expectations is observed or expired, so a lost watch event costs one timeout, never
  a stuck InferenceReplica, and a long pass's last writes hold the key as long as its first
  (were they all to expire with the oldest, the writes a pass sent 50 s in would hold it
  for only 10 s);
* everything runs on the event loop; no method awaits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from omed.api.constants import READINESS_GATE_SERVING
from omed.clock import Clock

DEFAULT_TIMEOUT = 60.0
"""Seconds after which unobserved writes stop holding a key back."""


@dataclass(slots=True)
class _Pending:
    creations: dict[str, float] = field(default_factory=dict)
    """pod name -> when its expectation was last written (monotonic)."""
    deletions: dict[str, float] = field(default_factory=dict)
    """pod uid -> when."""
    gates: dict[str, tuple[bool, float]] = field(default_factory=dict)
    """pod uid -> (the gate value written, when)."""

    def empty(self) -> bool:
        return not (self.creations or self.deletions or self.gates)

    def expire(self, before: float) -> None:
        """Drop the expectations written before ``before``."""
        for name, at in list(self.creations.items()):
            if at <= before:
                del self.creations[name]
        for uid, at in list(self.deletions.items()):
            if at <= before:
                del self.deletions[uid]
        for uid, (_, at) in list(self.gates.items()):
            if at <= before:
                del self.gates[uid]

    def newest(self) -> float:
        return max(
            (
                *self.creations.values(),
                *self.deletions.values(),
                *(at for _, at in self.gates.values()),
            ),
            default=0.0,
        )


def _gate(pod: Mapping[str, Any]) -> bool | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == READINESS_GATE_SERVING:
            return bool(cond.get("status") == "True")
    return None


class Expectations:
    """Unobserved pod writes per key; see the module docstring."""

    def __init__(self, *, clock: Clock, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._clock = clock
        self._timeout = timeout
        self._pending: dict[str, _Pending] = {}
        self._stale_versions: dict[str, tuple[frozenset[str], float]] = {}

    # -- the InferenceReplica's own writes --------------------------------------------------
    def expect_replica_past(self, key: str, versions: Iterable[str]) -> None:
        """The controller wrote over these resourceVersions of ``key``'s InferenceReplica."""
        stale = frozenset(v for v in versions if v)
        if stale:
            self._stale_versions[key] = (stale, self._clock.monotonic())

    def replica_current(self, key: str, version: str) -> bool:
        """Whether a cached InferenceReplica at ``version`` shows the controller's writes."""
        entry = self._stale_versions.get(key)
        if entry is None:
            return True
        stale, since = entry
        if version in stale and self._clock.monotonic() - since < self._timeout:
            return False
        del self._stale_versions[key]
        return True

    def _entry(self, key: str) -> _Pending:
        entry = self._pending.get(key)
        if entry is None:
            entry = _Pending()
            self._pending[key] = entry
        return entry

    # -- before a write ---------------------------------------------------------------------
    def expect_creations(self, key: str, names: Iterable[str]) -> None:
        now = self._clock.monotonic()
        self._entry(key).creations.update((name, now) for name in names)

    def expect_deletion(self, key: str, uid: str) -> None:
        self._entry(key).deletions[uid] = self._clock.monotonic()

    def expect_gate(self, key: str, uid: str, serving: bool) -> None:
        self._entry(key).gates[uid] = (serving, self._clock.monotonic())

    # -- when the API server answered --------------------------------------------------------
    def sent(
        self,
        key: str,
        *,
        creation: str | None = None,
        deletion: str | None = None,
        gate: str | None = None,
    ) -> None:
        """The write of one expectation (a pod name, or a pod uid) was accepted just now: its
        timeout counts from here. One already observed (its event came first) stays met."""
        entry = self._pending.get(key)
        if entry is None:
            return
        now = self._clock.monotonic()
        if creation is not None and creation in entry.creations:
            entry.creations[creation] = now
        if deletion is not None and deletion in entry.deletions:
            entry.deletions[deletion] = now
        if gate is not None and gate in entry.gates:
            entry.gates[gate] = (entry.gates[gate][0], now)

    # -- when a write will never be observed ------------------------------------------------
    def creation_failed(self, key: str, name: str) -> None:
        entry = self._pending.get(key)
        if entry is not None:
            entry.creations.pop(name, None)

    def deletion_failed(self, key: str, uid: str) -> None:
        entry = self._pending.get(key)
        if entry is not None:
            entry.deletions.pop(uid, None)

    def gate_failed(self, key: str, uid: str) -> None:
        entry = self._pending.get(key)
        if entry is not None:
            entry.gates.pop(uid, None)

    # -- informer events --------------------------------------------------------------------
    def observe(self, key: str, pod: Mapping[str, Any]) -> None:
        """A pod of ``key`` was added or updated in the cache."""
        self._seen(key, pod, gone=False)

    def observe_gone(self, key: str, pod: Mapping[str, Any]) -> None:
        """A pod of ``key`` left the cache."""
        self._seen(key, pod, gone=True)

    def _seen(self, key: str, pod: Mapping[str, Any], *, gone: bool) -> None:
        """A created pod shows once it is in the cache; a deleted one once it is
        Terminating or gone; a gate once the cache shows its value (or the pod gone)."""
        entry = self._pending.get(key)
        if entry is None:
            return
        metadata = pod.get("metadata") or {}
        uid = str(metadata.get("uid") or "")
        entry.creations.pop(str(metadata.get("name") or ""), None)
        if gone or metadata.get("deletionTimestamp"):
            entry.deletions.pop(uid, None)
        wanted = entry.gates.get(uid)
        if gone or (wanted is not None and _gate(pod) == wanted[0]):
            entry.gates.pop(uid, None)

    # -- the controller ---------------------------------------------------------------------
    def satisfied(self, key: str) -> bool:
        """Whether ``key`` may be planned for: each of its writes observed or expired."""
        entry = self._pending.get(key)
        if entry is not None:
            entry.expire(self._clock.monotonic() - self._timeout)
        if entry is None or entry.empty():
            self._pending.pop(key, None)
            return True
        return False

    def remaining(self, key: str) -> float:
        """Seconds until the last of ``key``'s expectations expires (0 when satisfied)."""
        entry = self._pending.get(key)
        if entry is None or entry.empty():
            return 0.0
        return max(0.0, self._timeout - (self._clock.monotonic() - entry.newest()))

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
        self._stale_versions.pop(key, None)

    def pending(self, key: str) -> tuple[int, int, int]:
        """(creations, deletions, gate writes) still unobserved for ``key``."""
        entry = self._pending.get(key)
        if entry is None:
            return (0, 0, 0)
        return (len(entry.creations), len(entry.deletions), len(entry.gates))
