"""Simulate sharded managers on per-shard Leases (docs/scale.md); print JSON.

    .venv/bin/python bench/shard_sim.py [--services 10000] [--shards 256] [--seed 1]
        [--lease-duration 60] [--renew-deadline 40] [--retry-period 8] [--max-delay 5]

Why this script exists: the sharding design in docs/scale.md claims that (1) no object is
ever acted on by two managers at once, through joins, graceful leaves, crashes, stalls and
partitions, as long as each manager writes for a shard only while its fence on that
shard's Lease passes, and (2) a membership change moves about 1/n of the services, the
least any assignment can. This checks both on a discrete-time model, with the chart's
leader-election timings by default.

The model (time steps of 0.5 s):

* ``--services`` InferenceServices, each in virtual shard ``hash(namespace/name) % shards``
  (what the admission webhook writes into the shard label; fixed for the object's life);
* managers 3 to 12. Each renews its member Lease and every shard Lease it holds every
  ``retry-period`` while it runs; it observes the Leases (its membership view, and each
  shard Lease's record) at the same cadence, so what it knows is up to one period old;
* a manager wants the shards that rendezvous hashing (highest random weight of
  ``(shard, manager)``) gives it over the members it sees alive (a member Lease observed
  changing within ``lease-duration``). It takes a wanted shard's Lease when the Lease is
  free (released) or has not changed, as it observed it, for ``lease-duration`` (client-go's
  rule, :mod:`omed.leaderelection`); writes are optimistic, so one taker wins. It releases
  a shard it no longer wants at once (its workers for that shard stop first);
* a manager acts on a shard (sends a write for one of its objects) only while it holds the
  shard's Lease and its fence passes: less than ``renew-deadline`` after the start of its
  last successful renew (omed's write fence, ``LeaderElector.check_fence``). A write that
  passes the fence reaches the API server within ``max-delay``;
* faults: ``crash`` (stops at once, nothing released), ``stall`` (the process freezes for
  longer than the lease, then resumes and tries its queued writes: the fence must refuse
  them), ``partition`` (runs and tries to write, but nothing it sends, renews included,
  arrives, for longer than the lease), ``leave`` (graceful: releases its shard Leases and
  its member Lease), ``join``.

Checked at every step, for every service: at most one manager may act on it; and a new
owner's first write comes after the last write of the previous owner can have landed
(that one passed the fence at most ``max-delay`` earlier; after a graceful handoff its
writes have landed before the release): ``min_margin_after_takeover_s`` and
``min_margin_after_handoff_s`` must stay >= 0. Reported per
membership change: the fraction of services whose owner changed once the fleet settled,
against the ideal (1/(n+1) for a join, the leaver's share for a leave or crash), the same
for a plain ``hash % n`` assignment, the time until every shard was owned as wanted, the
longest a shard went without an owner, and the load spread (max/mean services per
manager). The run fails (non-zero exit) when a check is violated.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import random
import statistics
import sys
from collections import Counter

DT = 0.5


def h64(*parts: str) -> int:
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def hrw(shard: int, members: list[str]) -> str:
    """Rendezvous hashing: the member with the highest weight for this shard."""
    return assignment(tuple(members), shard + 1)[shard]


@functools.lru_cache(maxsize=4096)
def assignment(members: tuple[str, ...], shards: int) -> tuple[str, ...]:
    return tuple(max(members, key=lambda m: h64(str(s), m)) for s in range(shards))


@dataclasses.dataclass
class LeaseRecord:
    holder: str = ""
    version: int = 0  # bumped by every write (acquire, renew, release)


@dataclasses.dataclass
class Observation:
    version: int = -1
    changed_at: float = 0.0


@dataclasses.dataclass
class Manager:
    name: str
    alive: bool = True
    stalled_until: float = 0.0
    partitioned_until: float = 0.0
    next_cycle: float = 0.0
    held: dict[int, float] = dataclasses.field(default_factory=dict)  # shard -> last renew start
    seen_members: dict[str, Observation] = dataclasses.field(default_factory=dict)
    seen_shards: dict[int, Observation] = dataclasses.field(default_factory=dict)

    def running(self, now: float) -> bool:
        return self.alive and now >= self.stalled_until

    def reaches_api(self, now: float) -> bool:
        return now >= self.partitioned_until

    def fence_passes(self, shard: int, now: float, renew_deadline: float) -> bool:
        renewed = self.held.get(shard)
        return renewed is not None and now < renewed + renew_deadline


class World:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.now = 0.0
        self.shard_of = [h64(f"ns-{i % 97}/svc-{i}") % args.shards for i in range(args.services)]
        self.services_in = Counter(self.shard_of)
        self.shard_leases = [LeaseRecord() for _ in range(args.shards)]
        self.member_leases: dict[str, LeaseRecord] = {}
        self.managers: dict[str, Manager] = {}
        self.rand = random.Random(args.seed)
        # Safety bookkeeping, per shard: who may act now, when the last one could last act.
        self.actor: list[str | None] = [None] * args.shards
        # (manager, when its last write could land by, handed over gracefully)
        self.last_fence_end: list[tuple[str, float, bool] | None] = [None] * args.shards
        self.double_owned_steps = 0
        self.min_margin = {"takeover": float("inf"), "handoff": float("inf")}
        self.refused_writes = 0
        self.unowned_since: list[float | None] = [0.0] * args.shards
        self.longest_unowned = 0.0
        self.counter = 0
        self.handed_over = 0  # services whose shard got a new acting owner, counted per change

    # -- the fleet ---------------------------------------------------------------------------
    def join(self) -> str:
        self.counter += 1
        name = f"m{self.counter}"
        self.managers[name] = Manager(name, next_cycle=self.now)
        self.member_leases[name] = LeaseRecord(holder=name)
        return name

    def live_names(self) -> list[str]:
        return sorted(n for n, m in self.managers.items() if m.alive)

    # -- one step ----------------------------------------------------------------------------
    def step(self) -> None:
        args = self.args
        for manager in list(self.managers.values()):
            if not manager.running(self.now) or self.now < manager.next_cycle:
                continue
            manager.next_cycle = self.now + args.retry_period
            self.cycle(manager)
        self.check()
        self.now += DT

    def cycle(self, m: Manager) -> None:
        args, now = self.args, self.now
        reaches = m.reaches_api(now)
        # Renew what it holds (and its member Lease); a renew that does not arrive fails.
        for shard, renewed in list(m.held.items()):
            if now >= renewed + args.renew_deadline:
                del m.held[shard]  # the renew deadline passed: it stops leading the shard
                continue
            if reaches:
                self.shard_leases[shard].version += 1
                m.held[shard] = now
        if reaches:
            self.member_leases.setdefault(m.name, LeaseRecord(holder=m.name)).version += 1
        else:
            return  # it can neither observe nor write
        # Observe.
        for name, lease in self.member_leases.items():
            seen = m.seen_members.setdefault(name, Observation())
            if seen.version != lease.version:
                seen.version, seen.changed_at = lease.version, now
        members = sorted(
            name
            for name, seen in m.seen_members.items()
            if name in self.member_leases and now - seen.changed_at < args.lease_duration
        )
        for name, seen in m.seen_members.items():
            # Expired as this manager observed it: delete it (with the version it read as a
            # precondition), so a manager that joins later does not wait a lease duration
            # to learn it is dead. A member that comes back creates it again.
            lease = self.member_leases.get(name)
            expired = now - seen.changed_at >= args.lease_duration
            if name != m.name and lease is not None and expired and lease.version == seen.version:
                del self.member_leases[name]
        if m.name not in members:
            members = sorted([*members, m.name])
        wants = assignment(tuple(members), args.shards)
        for shard in range(args.shards):
            lease = self.shard_leases[shard]
            seen = m.seen_shards.setdefault(shard, Observation())
            if seen.version != lease.version:
                seen.version, seen.changed_at = lease.version, now
            wanted = wants[shard] == m.name
            if shard in m.held and not wanted:
                self.release(m, shard)
            elif shard not in m.held and wanted:
                free = lease.holder == ""
                expired = now - seen.changed_at >= args.lease_duration
                if free or expired:
                    lease.holder = m.name
                    lease.version += 1
                    m.held[shard] = now

    def release(self, m: Manager, shard: int) -> None:
        """A graceful release: the shard's workers stop and their writes land, then the
        Lease is written free."""
        del m.held[shard]
        self.last_fence_end[shard] = (m.name, self.now, True)
        lease = self.shard_leases[shard]
        lease.holder = ""
        lease.version += 1

    def check(self) -> None:
        args, now = self.args, self.now
        actors: dict[int, list[str]] = {}
        for m in self.managers.values():
            if not m.alive:
                continue  # a crashed process sends nothing
            for shard in m.held:
                if m.fence_passes(shard, now, args.renew_deadline):
                    actors.setdefault(shard, []).append(m.name)
                else:
                    # Stalled or partitioned past the deadline: what it tries is refused.
                    self.refused_writes += 1
        for shard in range(args.shards):
            acting = actors.get(shard, ())
            if len(acting) > 1:
                self.double_owned_steps += 1
            actor = acting[0] if acting else None
            previous = self.last_fence_end[shard]
            if actor is not None and self.actor[shard] != actor and previous is not None:
                before, landed_by, handed = previous
                if before != actor:
                    self.handed_over += self.services_in[shard]
                    kind = "handoff" if handed else "takeover"
                    self.min_margin[kind] = min(self.min_margin[kind], now - landed_by)
            if actor is not None:
                # A write that passes the fence now lands within max_delay.
                self.last_fence_end[shard] = (actor, now + args.max_delay, False)
            self.actor[shard] = actor
            # Availability: how long the shard has had nobody who may act.
            if actor is None:
                if self.unowned_since[shard] is None:
                    self.unowned_since[shard] = now
            else:
                since = self.unowned_since[shard]
                if since is not None and since > 0.0:
                    self.longest_unowned = max(self.longest_unowned, now - since)
                self.unowned_since[shard] = None

    # -- settling and measuring --------------------------------------------------------------
    def owners(self) -> list[str | None]:
        """The shard Lease holders."""
        return [lease.holder or None for lease in self.shard_leases]

    def settled(self) -> bool:
        members = self.live_names()
        if not members:
            return True
        wants = assignment(tuple(members), self.args.shards)
        for shard, lease in enumerate(self.shard_leases):
            holder = lease.holder
            if holder != wants[shard] or holder not in self.managers:
                return False
            if not self.managers[holder].fence_passes(shard, self.now, self.args.renew_deadline):
                return False
        return True

    def run_until_settled(self, limit: float = 2000.0) -> float:
        began = self.now
        while not self.settled():
            self.step()
            if self.now - began > limit:
                raise RuntimeError("the fleet did not settle")
        return self.now - began

    def run_for(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end:
            self.step()


def moved_fraction(before: list[str | None], after: list[str | None], world: World) -> float:
    moved = sum(
        world.services_in[shard] for shard in range(len(before)) if before[shard] != after[shard]
    )
    return moved / world.args.services


def modulo_moved(before: list[str], after: list[str], services: int) -> float:
    """The same change with ``hash % n`` over the sorted member list."""
    moved = 0
    for i in range(services):
        key = f"ns-{i % 97}/svc-{i}"
        weight = h64(key)
        if before[weight % len(before)] != after[weight % len(after)]:
            moved += 1
    return moved / services


def spread(world: World) -> float:
    load = Counter()
    for shard, lease in enumerate(world.shard_leases):
        load[lease.holder] += world.services_in[shard]
    values = [load[name] for name in world.live_names()]
    return max(values) / statistics.mean(values)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=256)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lease-duration", type=float, default=60.0)
    parser.add_argument("--renew-deadline", type=float, default=40.0)
    parser.add_argument("--retry-period", type=float, default=8.0)
    parser.add_argument("--max-delay", type=float, default=5.0)
    args = parser.parse_args()
    world = World(args)
    for _ in range(3):
        world.join()
    world.run_until_settled()

    changes: list[dict[str, object]] = []
    fault_length = [0.0]

    def change(kind: str, action: object) -> None:
        members_before = world.live_names()
        owners_before = world.owners()
        share = None
        if isinstance(action, str):  # the manager that leaves, crashes, ...
            share = (
                sum(world.services_in[s] for s, o in enumerate(owners_before) if o == action)
                / args.services
            )
        began = world.now
        handed_before = world.handed_over
        apply(kind, action)
        if kind in ("stall", "partition"):
            # Not a membership change for long: the manager is back after the fault, and
            # takes its shards back. Measured from before the fault to after its return.
            world.run_for(fault_length[0] + args.retry_period)
        settle = world.run_until_settled()
        members_after = world.live_names()
        n_before, n_after = len(members_before), len(members_after)
        ideal = 1 / n_after if kind == "join" else (share if share is not None else 1 / n_before)
        moved = moved_fraction(owners_before, world.owners(), world)
        changes.append(
            {
                "change": kind,
                "managers": f"{n_before}->{n_after}",
                "at_s": began,
                "moved_fraction": round(moved, 4),
                "ideal_fraction": round(ideal, 4),
                "moved_over_ideal": round(moved / ideal, 3) if ideal else None,
                "modulo_moved_fraction": round(
                    modulo_moved(members_before, members_after, args.services), 4
                )
                if members_before != members_after
                else 0.0,
                "handed_over_fraction": round(
                    (world.handed_over - handed_before) / args.services, 4
                ),
                "settled_after_s": round(
                    world.now - began if kind in ("stall", "partition") else settle, 1
                ),
                "load_max_over_mean": round(spread(world), 3),
            }
        )

    def apply(kind: str, action: object) -> None:
        if kind == "join":
            world.join()
        elif kind == "leave":
            assert isinstance(action, str)
            m = world.managers[action]
            for shard in list(m.held):
                world.release(m, shard)
            m.alive = False
            del world.member_leases[action]
        elif kind == "crash":
            assert isinstance(action, str)
            world.managers[action].alive = False
        elif kind in ("stall", "partition"):
            assert isinstance(action, str)
            m = world.managers[action]
            length = args.lease_duration * 2 + world.rand.uniform(0, args.lease_duration)
            fault_length[0] = length
            if kind == "stall":
                m.stalled_until = world.now + length
            else:
                m.partitioned_until = world.now + length

    # Grow 3 -> 12, then churn: leaves, crashes, stalls, partitions and joins back.
    for _ in range(9):
        change("join", None)
        world.run_for(world.rand.uniform(0, args.retry_period * 3))
    script = ["crash", "leave", "stall", "join", "partition", "crash", "join", "leave", "join"]
    script += ["crash", "crash", "join", "join", "stall", "partition", "leave", "join"]
    for kind in script:
        if kind == "join":
            change("join", None)
        else:
            victim = world.rand.choice(world.live_names())
            change(kind, victim)
        world.run_for(world.rand.uniform(0, args.retry_period * 3))

    membership = [c for c in changes if c["change"] in ("join", "leave", "crash")]
    ratios = [float(c["moved_over_ideal"]) for c in membership if c["moved_over_ideal"]]
    result = {
        "services": args.services,
        "shards": args.shards,
        "timings_s": {
            "lease_duration": args.lease_duration,
            "renew_deadline": args.renew_deadline,
            "retry_period": args.retry_period,
            "max_write_delay": args.max_delay,
        },
        "simulated_s": world.now,
        "double_owned_steps": world.double_owned_steps,
        "min_margin_after_takeover_s": world.min_margin["takeover"],
        "min_margin_after_handoff_s": world.min_margin["handoff"],
        "writes_refused_by_fence": world.refused_writes,
        "longest_shard_without_owner_s": world.longest_unowned,
        "membership_changes": len(membership),
        "moved_over_ideal_mean": round(statistics.mean(ratios), 3),
        "moved_over_ideal_max": round(max(ratios), 3),
        "faults": {
            c["change"] + "@" + str(c["at_s"]): {
                "handed_over_fraction": c["handed_over_fraction"],
                "back_to_settled_s": c["settled_after_s"],
            }
            for c in changes
            if c["change"] in ("stall", "partition")
        },
        "modulo_moved_fraction_mean": round(
            statistics.mean(float(c["modulo_moved_fraction"]) for c in membership), 4
        ),
        "changes": changes,
    }
    print(json.dumps(result, indent=2))
    ok = world.double_owned_steps == 0 and min(world.min_margin.values()) >= 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
