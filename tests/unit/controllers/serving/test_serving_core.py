"""The serving controller's pure core: what a component wants, and the writes that get there.

A small in-memory API server (:class:`Cluster`) applies the core's writes as the real one
would (a create stores the body, a merge patch merges, a delete removes), so the properties
can say: from any start, one pass brings the component to what it wants, and the next pass
writes nothing; what a user added is never taken away.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from omed.api.constants import LABEL_REVISION, LABEL_REVISION_HASH, LABEL_RUNNER
from omed.config.disruption import DisruptionBudget, InstancePercent
from omed.controllers.serving.core import names
from omed.controllers.serving.core.actions import Create, Delete, Patch
from omed.controllers.serving.core.budget import min_available_pods
from omed.controllers.serving.core.decide import decide
from omed.controllers.serving.core.model import (
    BUDGET_INVALID,
    BudgetSetting,
    Component,
    Observed,
    RevisionSelector,
    ServicePort,
)
from omed.controllers.serving.core.observe import (
    component_of,
    pod_revision,
    revision_selectors,
    runner_labelled,
    service_ports,
)

UID = "uid-1"
HASH_A, HASH_B = "0a1b2c3d", "4e5f6a7b"
MAX_UNAVAILABLE_1 = DisruptionBudget(maxUnavailable=1)


def container(name: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "image": "ome/srt:1.0", "ports": list(ports)}


def irep(
    *,
    name: str = "chat-engine",
    parent: str | None = "chat",
    component: str = "engine",
    replicas: int = 3,
    runners: list[dict[str, Any]] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    template = {
        "spec": {"containers": [container("main", {"name": "http", "containerPort": 8080})]}
    }
    spec: dict[str, Any] = {
        "component": component,
        "replicas": replicas,
        "runners": runners or [{"name": "default", "template": template}],
    }
    if parent is not None:
        spec["parentRef"] = {"name": parent}
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": UID}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec}


def engine(**overrides: Any) -> Component:
    component = component_of(irep(**overrides))
    assert component is not None
    return component


# -- observe -----------------------------------------------------------------------------------


def test_service_ports_names_dedupes_and_generates() -> None:
    template = {
        "spec": {
            "containers": [
                container(
                    "main",
                    {"name": "http", "containerPort": 8080},
                    {"containerPort": 9090},
                    {"containerPort": 8080, "name": "again"},  # same port and protocol: dropped
                    {"containerPort": 5353, "protocol": "UDP"},
                ),
                container("sidecar", {"name": "http", "containerPort": 8081}),  # name taken
                {"name": "bare"},
            ]
        }
    }
    assert service_ports(template) == (
        ServicePort("http", 8080),
        ServicePort("tcp-9090", 9090),
        ServicePort("udp-5353", 5353, "UDP"),
        ServicePort("tcp-8081", 8081),
    )
    assert service_ports({}) == ()


def test_component_of_leader_and_workers_takes_the_leaders_ports() -> None:
    leader = {"spec": {"containers": [container("main", {"containerPort": 30000})]}}
    worker = {"spec": {"containers": [container("main", {"containerPort": 40000})]}}
    component = engine(
        component="decoder",
        name="chat-decoder",
        runners=[
            {"name": "worker", "size": 2, "template": worker},
            {"name": "leader", "template": leader},
        ],
    )
    assert component.ports == (ServicePort("tcp-30000", 30000),)
    assert component.pods_per_instance == 3
    assert (component.isvc, component.component) == ("chat", "decoder")


def test_a_standalone_replica_is_its_own_isvc() -> None:
    component = engine(name="solo", parent=None)
    assert component.isvc == "solo"
    assert names.base_name(isvc=component.isvc, component=component.component) == "solo-engine"


def test_component_of_an_unreadable_spec_is_none() -> None:
    assert component_of({"metadata": {"name": "x"}, "spec": {"component": "engine"}}) is None


def pod(*, revision: str | None = None, digest: str | None = None) -> dict[str, Any]:
    labels = {}
    if revision is not None:
        labels[LABEL_REVISION] = revision
    if digest is not None:
        labels[LABEL_REVISION_HASH] = digest
    return {"metadata": {"labels": labels}}


def test_pod_revision_reads_the_hash_label_else_the_full_name() -> None:
    assert pod_revision(pod(revision=f"chat-engine-{HASH_A}", digest=HASH_A)) == (HASH_A, True)
    assert pod_revision(pod(revision=f"chat-engine-{HASH_A}")) == (HASH_A, False)
    assert pod_revision(pod(digest=HASH_B)) == (HASH_B, True)
    assert pod_revision(pod(revision="not-a-revision")) is None
    assert pod_revision(pod()) is None


def test_revision_selectors_use_the_hash_label_only_when_every_pod_has_it() -> None:
    full_a, full_b = f"chat-engine-{HASH_A}", f"chat-engine-{HASH_B}"
    selectors = revision_selectors(
        [
            pod(revision=full_a, digest=HASH_A),
            pod(revision=full_a),  # made before omed stamped the hash
            pod(revision=full_b, digest=HASH_B),
        ]
    )
    assert selectors == {
        HASH_A: RevisionSelector(LABEL_REVISION, full_a),
        HASH_B: RevisionSelector(LABEL_REVISION_HASH, HASH_B),
    }


# -- the budget ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "replicas", "pods", "expected"),
    [
        (DisruptionBudget(maxUnavailable=1), 3, 1, 2),
        (DisruptionBudget(maxUnavailable=1), 2, 3, 3),
        (DisruptionBudget(maxUnavailable=5), 2, 3, 0),
        (DisruptionBudget(minAvailable=2), 3, 3, 6),
        (DisruptionBudget(minAvailable=9), 3, 1, 3),
        (DisruptionBudget(minAvailable=InstancePercent(50)), 3, 1, 2),
        (DisruptionBudget(maxUnavailable=InstancePercent(50)), 3, 2, 2),
        (DisruptionBudget(maxUnavailable=InstancePercent(0)), 4, 2, 8),
        (DisruptionBudget(minAvailable=InstancePercent(100)), 0, 2, 0),
    ],
)
def test_min_available_is_counted_in_pods(
    budget: DisruptionBudget, replicas: int, pods: int, expected: int
) -> None:
    assert min_available_pods(budget, replicas=replicas, pods_per_instance=pods) == expected


bounds = st.one_of(st.integers(0, 50), st.integers(0, 100).map(InstancePercent))


@given(
    bound=bounds,
    use_min=st.booleans(),
    replicas=st.integers(0, 40),
    pods=st.integers(1, 8),
)
def test_min_available_is_whole_instances_within_the_component(
    bound: int | InstancePercent, use_min: bool, replicas: int, pods: int
) -> None:
    budget = DisruptionBudget(**{"minAvailable" if use_min else "maxUnavailable": bound})
    result = min_available_pods(budget, replicas=replicas, pods_per_instance=pods)
    assert 0 <= result <= replicas * pods
    assert result % pods == 0


@given(a=st.integers(0, 100), b=st.integers(0, 100), replicas=st.integers(0, 40))
def test_a_higher_bound_keeps_more_a_higher_unavailability_less(
    a: int, b: int, replicas: int
) -> None:
    low, high = sorted((a, b))

    def keep(**bound: Any) -> int:
        return min_available_pods(DisruptionBudget(**bound), replicas=replicas, pods_per_instance=1)

    assert keep(minAvailable=InstancePercent(low)) <= keep(minAvailable=InstancePercent(high))
    assert keep(maxUnavailable=InstancePercent(low)) >= keep(maxUnavailable=InstancePercent(high))


# -- decide against an in-memory API server --------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies ``application/merge-patch+json``."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Cluster:
    """Services and PDBs by name, with uids and resourceVersions, as the caches show them."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, Any]] = {}
        self.budgets: dict[str, dict[str, Any]] = {}
        self._versions = itertools.count(1)

    def _store(self, kind: str) -> dict[str, dict[str, Any]]:
        return self.services if kind == "Service" else self.budgets

    def put(self, kind: str, body: Mapping[str, Any]) -> None:
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{meta['name']}-{next(self._versions)}")
        meta["resourceVersion"] = str(next(self._versions))
        self._store(kind)[meta["name"]] = obj

    def apply(self, decision_actions: tuple[Any, ...]) -> None:
        for action in decision_actions:
            store = self._store(action.kind)
            if isinstance(action, Create):
                assert action.name not in store, f"create of an existing {action.name}"
                self.put(action.kind, action.body)
            elif isinstance(action, Patch):
                current = store[action.name]
                assert (
                    action.patch["metadata"]["resourceVersion"]
                    == (current["metadata"]["resourceVersion"])
                )
                self.put(action.kind, merge_patch(current, action.patch))
            elif isinstance(action, Delete):
                assert store[action.name]["metadata"]["uid"] == action.uid
                del store[action.name]

    def observe(
        self,
        component: Component,
        revisions: Mapping[str, RevisionSelector],
        setting: BudgetSetting = MAX_UNAVAILABLE_1,
    ) -> Observed:
        base = names.base_name(isvc=component.isvc, component=component.component)
        return Observed(
            component=component,
            revisions=revisions,
            services=dict(self.services),
            budget=self.budgets.get(base),
            budget_setting=setting,
        )


def revisions(*digests: str) -> dict[str, RevisionSelector]:
    return {d: RevisionSelector(LABEL_REVISION_HASH, d) for d in digests}


def converge(cluster: Cluster, observe: Any) -> int:
    """Passes until one decides nothing; how many wrote."""
    for passes in range(5):
        decision = decide(observe())
        if not decision.actions:
            return passes
        cluster.apply(decision.actions)
    raise AssertionError("no fixed point after 5 passes")


def test_a_new_component_gets_its_services_and_budget() -> None:
    cluster = Cluster()
    component = engine()
    decision = decide(cluster.observe(component, revisions(HASH_A)))
    created = {
        a.name: a.body for a in decision.actions if isinstance(a, Create) and a.kind == "Service"
    }
    assert set(created) == {
        "chat-engine",
        "chat-engine-headless",
        f"chat-engine-rev-{HASH_A}",
        f"chat-engine-rev-{HASH_A}-headless",
    }
    traffic, headless = created["chat-engine"], created["chat-engine-headless"]
    identity = {"ome.io/inferenceservice": "chat", "component": "engine"}
    assert traffic["spec"] == {
        "selector": identity,
        "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}],
    }
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["selector"] == identity
    revision = created[f"chat-engine-rev-{HASH_A}"]
    assert revision["spec"]["selector"] == {**identity, LABEL_REVISION_HASH: HASH_A}
    assert revision["metadata"]["labels"] == {**identity, LABEL_REVISION_HASH: HASH_A}
    (owner,) = traffic["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "name": "chat-engine",
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    budget = next(a for a in decision.actions if a.kind == "PodDisruptionBudget")
    assert isinstance(budget, Create)
    assert budget.body["spec"] == {"minAvailable": 2, "selector": {"matchLabels": identity}}
    assert budget.body["apiVersion"] == "policy/v1"


def test_a_create_in_flight_is_not_sent_again_and_the_rest_goes_on() -> None:
    cluster = Cluster()
    component = engine()
    observed = cluster.observe(component, revisions(HASH_A))
    creating = frozenset({("Service", "chat-engine"), ("PodDisruptionBudget", "chat-engine")})
    decision = decide(dataclasses.replace(observed, creating=creating))
    created = {(a.kind, a.name) for a in decision.actions if isinstance(a, Create)}
    assert not created & creating
    assert ("Service", "chat-engine-headless") in created
    assert not decision.taken


def test_users_labels_and_annotations_survive_and_a_port_change_patches_only_ports() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), revisions(HASH_A)))
    traffic = cluster.services["chat-engine"]
    traffic["metadata"]["labels"]["team"] = "serving"
    traffic["metadata"].setdefault("annotations", {})["note"] = "mine"
    traffic["spec"]["ports"][0]["appProtocol"] = "http"
    assert not decide(cluster.observe(engine(), revisions(HASH_A))).actions

    changed = {"spec": {"containers": [container("main", {"name": "http", "containerPort": 9000})]}}
    component = engine(runners=[{"name": "default", "template": changed}])
    decision = decide(cluster.observe(component, revisions(HASH_A)))
    patch = next(a for a in decision.actions if a.name == "chat-engine")
    assert isinstance(patch, Patch)
    assert set(patch.patch) == {"metadata", "spec"}
    assert patch.patch["metadata"] == {"resourceVersion": traffic["metadata"]["resourceVersion"]}
    assert patch.patch["spec"] == {
        "ports": [
            {
                "appProtocol": "http",
                "name": "http",
                "port": 9000,
                "targetPort": 9000,
                "protocol": "TCP",
            }
        ]
    }
    cluster.apply(decision.actions)
    after = cluster.services["chat-engine"]
    assert after["metadata"]["labels"]["team"] == "serving"
    assert after["metadata"]["annotations"] == {"note": "mine"}


def test_a_selector_is_made_exact_and_labels_are_merged() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), revisions()))
    headless = cluster.services["chat-engine-headless"]
    headless["spec"]["selector"]["extra"] = "x"
    headless["metadata"]["labels"]["component"] = "wrong"
    headless["spec"]["publishNotReadyAddresses"] = False
    (patch,) = decide(cluster.observe(engine(), revisions())).actions
    assert isinstance(patch, Patch)
    assert patch.patch["spec"] == {
        "selector": {"extra": None, "ome.io/inferenceservice": "chat", "component": "engine"},
        "publishNotReadyAddresses": True,
    }
    assert patch.patch["metadata"]["labels"] == {"component": "engine"}


def test_services_of_revisions_no_pod_runs_are_deleted() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), revisions(HASH_A, HASH_B)))
    decision = decide(cluster.observe(engine(), revisions(HASH_B)))
    deleted = {a.name for a in decision.actions if isinstance(a, Delete)}
    assert deleted == {f"chat-engine-rev-{HASH_A}", f"chat-engine-rev-{HASH_A}-headless"}
    assert all(isinstance(a, Delete) for a in decision.actions)


def test_a_component_without_ports_has_only_headless_services() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), revisions(HASH_A)))
    bare = engine(runners=[{"name": "default", "template": {"spec": {"containers": []}}}])
    decision = decide(cluster.observe(bare, revisions(HASH_A)))
    deleted = {a.name for a in decision.actions if isinstance(a, Delete)}
    assert deleted == {"chat-engine", f"chat-engine-rev-{HASH_A}"}
    cluster.apply(decision.actions)
    converge(cluster, lambda: cluster.observe(bare, revisions(HASH_A)))
    assert "ports" not in cluster.services["chat-engine-headless"]["spec"]


def test_a_deleted_component_writes_nothing() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), revisions(HASH_A)))
    gone = engine(deleting=True, replicas=0)
    assert not decide(cluster.observe(gone, {})).actions
    assert not decide(Cluster().observe(gone, revisions(HASH_A))).actions


def test_the_budget_follows_the_setting() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), {}))
    assert cluster.budgets["chat-engine"]["spec"]["minAvailable"] == 2
    cluster.budgets["chat-engine"]["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
    # Scaled to 5 Instances: minAvailable follows, the user's field stays.
    converge(cluster, lambda: cluster.observe(engine(replicas=5), {}))
    assert cluster.budgets["chat-engine"]["spec"] == {
        "minAvailable": 4,
        "selector": {"matchLabels": {"ome.io/inferenceservice": "chat", "component": "engine"}},
        "unhealthyPodEvictionPolicy": "AlwaysAllow",
    }
    # An unusable entry keeps it as it is, even when it would change.
    assert not decide(cluster.observe(engine(replicas=1), {}, BUDGET_INVALID)).actions
    # Unconfigured: deleted.
    (delete,) = decide(cluster.observe(engine(), {}, None)).actions
    assert isinstance(delete, Delete) and delete.kind == "PodDisruptionBudget"


def test_a_users_max_unavailable_is_replaced_by_min_available() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), {}))
    spec = cluster.budgets["chat-engine"]["spec"]
    del spec["minAvailable"]
    spec["maxUnavailable"] = "50%"
    (patch,) = decide(cluster.observe(engine(), {})).actions
    assert isinstance(patch, Patch)
    assert patch.patch["spec"] == {"minAvailable": 2, "maxUnavailable": None}


def test_orphans_are_adopted_and_other_controllers_objects_left_alone() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), {}))
    cluster.services["chat-engine"]["metadata"]["ownerReferences"] = []
    other = {"kind": "Deployment", "name": "x", "uid": "u", "controller": True}
    cluster.services["chat-engine-headless"]["metadata"]["ownerReferences"] = [other]
    decision = decide(cluster.observe(engine(), {}))
    (adopt,) = decision.actions
    assert isinstance(adopt, Patch) and adopt.adopt and adopt.name == "chat-engine"
    assert adopt.patch["metadata"]["ownerReferences"][0]["uid"] == UID
    assert decision.taken == (("Service", "chat-engine-headless"),)


def test_a_service_of_the_wrong_kind_is_recreated() -> None:
    cluster = Cluster()
    converge(cluster, lambda: cluster.observe(engine(), {}))
    cluster.services["chat-engine"]["spec"]["clusterIP"] = "None"
    (delete,) = decide(cluster.observe(engine(), {})).actions
    assert isinstance(delete, Delete) and delete.name == "chat-engine"


def test_long_names_keep_their_suffix_within_63_characters() -> None:
    isvc = "a" * 47  # the longest the webhook admits with an engine: 47 + 7 + 9 = 63
    base = names.base_name(isvc=isvc, component="engine")
    for name in (
        names.headless_service(base),
        names.revision_service(base, HASH_A),
        names.revision_headless_service(base, HASH_A),
    ):
        assert len(name) <= 63
        assert not name.startswith("-") and "--" not in name
    assert names.revision_headless_service(base, HASH_A).endswith(f"-rev-{HASH_A}-headless")


ports_strategy = st.lists(
    st.tuples(st.sampled_from(["http", "grpc", None]), st.integers(1, 65535)), max_size=4
)


@settings(max_examples=60, deadline=None)
@given(
    before=st.tuples(ports_strategy, st.sets(st.sampled_from([HASH_A, HASH_B, "deadbeef"]))),
    after=st.tuples(ports_strategy, st.sets(st.sampled_from([HASH_A, HASH_B, "deadbeef"]))),
    replicas=st.integers(0, 6),
    size=st.integers(0, 3),
    user_label=st.booleans(),
)
def test_one_pass_converges_and_the_next_writes_nothing(
    before: tuple[list[tuple[str | None, int]], set[str]],
    after: tuple[list[tuple[str | None, int]], set[str]],
    replicas: int,
    size: int,
    user_label: bool,
) -> None:
    def component(ports: list[tuple[str | None, int]]) -> Component:
        declared = [{"containerPort": p, **({"name": n} if n else {})} for n, p in ports]
        runners = [
            {"name": "leader", "template": {"spec": {"containers": [container("m", *declared)]}}}
        ]
        if size:
            runners.append({"name": "worker", "size": size, "template": {}})
        return engine(replicas=replicas, runners=runners)

    cluster = Cluster()
    first = component(before[0])
    assert converge(cluster, lambda: cluster.observe(first, revisions(*before[1]))) <= 1
    labelled = set(cluster.services) if user_label else set()
    if user_label:
        for obj in (*cluster.services.values(), *cluster.budgets.values()):
            obj["metadata"]["labels"]["team"] = "serving"
    second = component(after[0])
    # A Service of the wrong kind takes two passes (delete, then create); here kinds don't flip.
    assert converge(cluster, lambda: cluster.observe(second, revisions(*after[1]))) <= 1
    wanted_revisions = after[1]
    has_ports = bool(second.ports)
    expected = {"chat-engine-headless"} | {
        f"chat-engine-rev-{d}-headless" for d in wanted_revisions
    }
    if has_ports:
        expected |= {"chat-engine"} | {f"chat-engine-rev-{d}" for d in wanted_revisions}
    assert set(cluster.services) == expected
    for obj in cluster.services.values():
        assert obj["spec"].get("ports", []) == [p.body() for p in second.ports]
    if user_label:
        # Every Service that lived through the second pass (names never change kind here)
        # keeps the user's label; only the ones it created lack it.
        for name in set(cluster.services) & labelled:
            assert cluster.services[name]["metadata"]["labels"]["team"] == "serving"
        assert "team" in cluster.budgets["chat-engine"]["metadata"]["labels"]
    assert cluster.budgets["chat-engine"]["spec"]["minAvailable"] == max(0, replicas - 1) * (
        1 + size
    )


def test_leaders_alone_take_traffic_once_every_pod_carries_the_runner_label() -> None:
    leader = {"spec": {"containers": [container("main", {"containerPort": 8080})]}}
    decoder = engine(
        component="decoder",
        name="chat-decoder",
        runners=[
            {"name": "leader", "template": leader},
            {"name": "worker", "size": 2, "template": {}},
        ],
    )
    assert runner_labelled([]) is False
    assert runner_labelled([{"metadata": {"labels": {LABEL_RUNNER: "leader"}}}, pod()]) is False
    assert runner_labelled([{"metadata": {"labels": {LABEL_RUNNER: "worker"}}}]) is True
    identity = {"ome.io/inferenceservice": "chat", "component": "decoder"}
    for labelled, serving in ((False, identity), (True, {**identity, LABEL_RUNNER: "leader"})):
        observed = Observed(
            component=decoder, revisions=revisions(HASH_A), runner_labelled=labelled
        )
        bodies = {a.name: a.body for a in decide(observed).actions if isinstance(a, Create)}
        assert bodies["chat-decoder"]["spec"]["selector"] == serving
        assert bodies[f"chat-decoder-rev-{HASH_A}"]["spec"]["selector"] == {
            **serving,
            LABEL_REVISION_HASH: HASH_A,
        }
        assert bodies["chat-decoder-headless"]["spec"]["selector"] == identity
        assert bodies[f"chat-decoder-rev-{HASH_A}-headless"]["spec"]["selector"] == {
            **identity,
            LABEL_REVISION_HASH: HASH_A,
        }
