"""Runtime revisions and their garbage collection, with the manager as the chart runs it.

The manager runs under the chart's ServiceAccount, arguments and ConfigMap; the two flags
are appended to the chart's arguments, as the patch of the Deployment that the operator
guide shows appends them (the chart has no values for them): ``--runtime-revision-retention=2``
and a grace period of :data:`GRACE` seconds. A ServingRuntime gets five versions of its spec;
an InferenceService pins the first (upstream's ``spec.runtime.revision``, kept as stored).
The pinned revision, and the two newest, stay; the other two are marked and, after the grace
period counted from the mark, deleted, although the manager is killed and started again in
between: the deletion happens at mark + grace, not at restart + grace. The operator guide's
``kubectl get controllerrevisions`` command, through the real kubectl, prints the NAME,
RUNTIME and MARKED columns.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import _support as support
import pytest
from _support import eventually, serving_runtime
from test_kubectl_ome import kubectl

from omed.api.constants import (
    ANNOTATION_GC_ELIGIBLE_SINCE,
    ANNOTATION_RUNTIME_SYNC,
    LABEL_RUNTIME_OF,
)
from omed.controllers.inferenceservice.core.pinning import (
    CONDITION_RUNTIME_DRIFTED,
    EVENT_RUNTIME_DRIFTED,
    REASON_REVISION_MISMATCH,
    STATUS_PINNED,
    STATUS_TOKEN,
)
from omed.controllers.runtimerevision.core.snapshot import content_hash
from omed.kube.client import KubeClient
from omed.kube.resources import (
    CONTROLLER_REVISIONS,
    EVENTS,
    INFERENCE_REPLICAS,
    INFERENCE_SERVICES,
    SERVING_RUNTIMES,
)

pytestmark = pytest.mark.integration

GRACE = 14
"""Seconds from mark to delete: long enough to restart the manager inside it, and for the
restarted manager to take the Lease over from the killed one (3 s) well before it ends."""
RUNTIME = "srt"


def runtime(version: int) -> dict[str, Any]:
    return serving_runtime(
        RUNTIME,
        engineConfig={"runner": {"name": "ome-container", "image": f"ome/srt:1.{version}"}},
    )


async def revisions(kube: KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    page = await kube.list_page(CONTROLLER_REVISIONS, namespace, labelSelector=LABEL_RUNTIME_OF)
    return {item["metadata"]["name"]: item for item in page.get("items") or []}


def mark_of(revision: dict[str, Any]) -> str | None:
    return (revision["metadata"].get("annotations") or {}).get(ANNOTATION_GC_ELIGIBLE_SINCE)


def parse(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


async def test_in_use_and_newest_revisions_stay_and_the_rest_go_at_mark_plus_grace(
    kube: KubeClient, namespace: str, managers: Any, control_plane: Any, kubeconfig: str
) -> None:
    own = managers.namespace
    args = ("--runtime-revision-retention=2", f"--runtime-revision-grace-period={GRACE}s")
    first = managers.start(*args, name="gc-first")
    await first.wait_ready(timeout=60)
    await eventually(first.is_leader, timeout=30, what="gc-first leads")

    body = runtime(1)
    live = await kube.create(SERVING_RUNTIMES, body, namespace)
    names: list[str] = []
    for version in range(1, 6):
        if version > 1:
            live["spec"] = runtime(version)["spec"]
            live = await kube.replace(SERVING_RUNTIMES, live, namespace)
        wanted = f"r-{namespace}-{RUNTIME}-{content_hash(live['spec'])}"

        async def written(name: str = wanted) -> dict[str, Any] | None:
            return (await revisions(kube, own)).get(name)

        stored = await eventually(written, timeout=30, what=f"revision {wanted}")
        assert stored["revision"] == version
        assert stored["data"] == live["spec"]
        assert stored["metadata"]["labels"][LABEL_RUNTIME_OF] == RUNTIME
        names.append(wanted)
        if version == 1:
            # Pinned the way upstream OME pins: spec.runtime.revision with autoSync false.
            await kube.create(
                INFERENCE_SERVICES,
                {
                    "apiVersion": "ome.io/v1beta1",
                    "kind": "InferenceService",
                    "metadata": {"name": "pinned"},
                    "spec": {
                        "deploymentMode": "RawDeployment",
                        "model": {"name": "llama-3-2-1b-instruct"},
                        "runtime": {
                            "name": RUNTIME,
                            "kind": "ServingRuntime",
                            "autoSync": False,
                            "revision": wanted,
                        },
                    },
                },
                namespace,
            )
    pinned, older, old, newer, current = names

    async def both_marked() -> dict[str, dict[str, Any]] | None:
        found = await revisions(kube, own)
        return found if mark_of(found[older]) and mark_of(found[old]) else None

    found = await eventually(both_marked, timeout=30, what="the two unused revisions marked")
    marks = {name: mark_of(found[name]) for name in (older, old)}
    assert all(mark_of(found[name]) is None for name in (pinned, newer, current))
    marked_at = min(parse(str(stamp)) for stamp in marks.values())

    code, out, err = await kubectl(
        control_plane,
        kubeconfig,
        "get",
        "controllerrevisions",
        "-n",
        own,
        "-l",
        "ome.io/runtime-of",
        "-o",
        "custom-columns=NAME:.metadata.name,RUNTIME:.metadata.labels.ome\\.io/runtime-of,"
        "MARKED:.metadata.annotations.ome\\.io/gc-eligible-since",
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "RUNTIME", "MARKED"]
    every = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    # Other tests' runtimes have revisions in the manager's namespace too (a revision
    # outlives its runtime and its namespace): this test's are those of its namespace.
    rows = {name: row for name, row in every.items() if name.startswith(f"r-{namespace}-")}
    assert all(len(row) == 2 for row in every.values()), out
    assert rows == {
        pinned: [RUNTIME, "<none>"],
        older: [RUNTIME, str(marks[older])],
        old: [RUNTIME, str(marks[old])],
        newer: [RUNTIME, "<none>"],
        current: [RUNTIME, "<none>"],
    }

    # Restart inside the grace period: the new manager counts from the marks on the objects.
    first.kill()
    await first.wait_exit(timeout=10)
    managers.withdraw(first)
    restarted_at = time.time()
    assert restarted_at < marked_at + GRACE - 5, "too late in the grace period to tell"
    second = managers.start(*args, name="gc-second")

    async def collected() -> dict[str, dict[str, Any]] | None:
        assert second.running(), second.log()
        now = await revisions(kube, own)
        if older in now or old in now:
            # Until then, marks keep their first time.
            assert {n: mark_of(now[n]) for n in (older, old) if n in now} == {
                n: marks[n] for n in (older, old) if n in now
            }
            return None
        return now

    left = await eventually(collected, timeout=GRACE + 30, what="the marked revisions deleted")
    deleted_at = time.time()
    # Counted again from the restart, the grace would begin no earlier than the moment the
    # new manager took the Lease (its own log line's time): a deletion before that moment
    # plus the grace was counted from the marks, however long the process took to start.
    acquired = await second.wait_log("successfully acquired lease", timeout=5)
    leading_at = dt.datetime.strptime(acquired.split("\t")[0], "%Y-%m-%dT%H:%M:%S.%fZ")
    leading_since = leading_at.replace(tzinfo=dt.UTC).timestamp()
    assert sorted(name for name in left if name.startswith(f"r-{namespace}-")) == sorted(
        [pinned, newer, current]
    )
    assert all(mark_of(left[name]) is None for name in (pinned, newer, current))
    assert deleted_at >= marked_at + GRACE
    assert leading_since >= restarted_at - 1
    assert deleted_at < leading_since + GRACE, (
        f"deleted {deleted_at - marked_at:.1f} s after the mark and "
        f"{deleted_at - leading_since:.1f} s after the new manager took the Lease: the grace "
        "period restarted"
    )
    assert second.log_lines("Deleted runtime revision")

    # Unpinned, the first revision is marked; pinned again, it loses its mark.
    async def repin(name: str) -> None:
        service = await kube.get(INFERENCE_SERVICES, "pinned", namespace)
        service["spec"]["runtime"]["revision"] = name
        await kube.replace(INFERENCE_SERVICES, service, namespace)

    await repin(newer)

    async def pinned_mark() -> str | None:
        return mark_of((await revisions(kube, own))[pinned])

    await eventually(pinned_mark, timeout=30, what="the unpinned revision marked")
    await repin(pinned)

    async def unmarked() -> bool:
        return await pinned_mark() is None

    await eventually(unmarked, timeout=30, what="the pinned revision's mark removed")


async def test_a_runtime_revision_keeps_its_labels_and_takes_annotations(
    kube: KubeClient, namespace: str, managers: Any, control_plane: Any, kubeconfig: str
) -> None:
    # The chart's ControllerRevision webhook, through the real API server and kubectl: a
    # relabel of a revision omed wrote is refused with upstream's message, an annotation is
    # taken, and a ControllerRevision that isn't a runtime revision never reaches the webhook.
    own = managers.namespace
    manager = managers.start(name="cr-webhook")
    await manager.wait_ready(timeout=60)
    await eventually(manager.is_leader, timeout=30, what="cr-webhook leads")
    live = await kube.create(SERVING_RUNTIMES, runtime(1), namespace)
    name = f"r-{namespace}-{RUNTIME}-{content_hash(live['spec'])}"

    async def written() -> dict[str, Any] | None:
        return (await revisions(kube, own)).get(name)

    await eventually(written, timeout=30, what=f"revision {name}")
    code, _out, err = await kubectl(
        control_plane,
        kubeconfig,
        "label",
        "controllerrevision",
        name,
        "-n",
        own,
        f"{LABEL_RUNTIME_OF}=other",
        "--overwrite",
    )
    assert code == 1
    assert f"ControllerRevision {own}/{name} is owned by OME; .labels are immutable" in err, err
    code, _out, err = await kubectl(
        control_plane, kubeconfig, "annotate", "controllerrevision", name, "-n", own, "note=x"
    )
    assert code == 0, err
    stored = await written()
    assert stored is not None
    assert stored["metadata"]["labels"][LABEL_RUNTIME_OF] == RUNTIME
    assert stored["metadata"]["annotations"]["note"] == "x"

    other = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "not-a-runtime-revision", "labels": {"app": "x"}},
        "data": {"spec": {}},
        "revision": 1,
    }
    await kube.create(CONTROLLER_REVISIONS, other, namespace)
    code, _out, err = await kubectl(
        control_plane,
        kubeconfig,
        "label",
        "controllerrevision",
        "not-a-runtime-revision",
        "-n",
        namespace,
        "app=y",
        "--overwrite",
    )
    assert code == 0, err
    await kube.delete(SERVING_RUNTIMES, RUNTIME, namespace)
    await kube.delete(CONTROLLER_REVISIONS, "not-a-runtime-revision", namespace)


# -- Pinning: autoSync false, RuntimeDrifted and the runtime-sync annotation -----------------


def image_of(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["containers"][0]["image"])


async def test_a_pinned_service_keeps_its_pods_through_a_runtime_edit_until_the_sync_annotation(
    kube: KubeClient, namespace: str, managers: Any
) -> None:
    """An OMENative InferenceService with ``autoSync: false`` pins the revision of its
    runtime's spec; an edit of the runtime leaves its pods as they are and sets RuntimeDrifted
    (and the event); a new ``ome.io/runtime-sync`` value moves the pin and the pods follow."""
    world = support.ManagerWorld(kube=kube, namespace=namespace, managers=managers)
    async with world.running(nodes=1):
        await world.start_manager("pin-a")
        service = support.inference_service(
            "chat", runtime=RUNTIME, engine={"minReplicas": 1, "maxReplicas": 1}
        )
        service["spec"]["runtime"]["autoSync"] = False
        created = await kube.create(SERVING_RUNTIMES, runtime(0), namespace)
        await kube.create(INFERENCE_SERVICES, service, namespace)
        first = f"r-{namespace}-{RUNTIME}-{content_hash(created['spec'])}"

        async def isvc() -> dict[str, Any]:
            world.check_manager()
            found: dict[str, Any] = await kube.get(INFERENCE_SERVICES, "chat", namespace)
            return found

        async def serving(image: str) -> dict[str, Any] | None:
            found = await isvc()
            pods = await world.pods()
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if (
                support.condition(found, "Ready") == "True"
                and len(pods) == len(live) == 1
                and image_of(live[0]) == image
                and support.pod_ready(live[0])
            ):
                return live[0]
            return None

        async def pinned_to(name: str) -> dict[str, Any] | None:
            found = await isvc()
            return found if (found.get("status") or {}).get(STATUS_PINNED) == name else None

        await eventually(lambda: pinned_to(first), timeout=60, what=f"the pin on {first}")
        pod = await eventually(
            lambda: serving("ome/srt:1.0"), timeout=120, what="the pinned pod Ready"
        )

        # The runtime edited: the pin stays, the pods too, RuntimeDrifted says so.
        created["spec"] = runtime(1)["spec"]
        edited = await kube.replace(SERVING_RUNTIMES, created, namespace)
        second = f"r-{namespace}-{RUNTIME}-{content_hash(edited['spec'])}"

        async def drifted() -> dict[str, Any] | None:
            found = await isvc()
            for item in (found.get("status") or {}).get("conditions") or ():
                if item.get("type") == CONDITION_RUNTIME_DRIFTED and item["status"] == "True":
                    return dict(item)
            return None

        condition = await eventually(drifted, timeout=60, what="RuntimeDrifted True")
        assert condition["reason"] == REASON_REVISION_MISMATCH
        assert second in condition["message"] and first in condition["message"]
        events = await kube.list_all(
            EVENTS, namespace, fieldSelector=f"reason={EVENT_RUNTIME_DRIFTED}"
        )
        assert [e["involvedObject"]["name"] for e in events] == ["chat"]
        assert (await isvc())["status"][STATUS_PINNED] == first
        engine = await kube.get(INFERENCE_REPLICAS, "chat-engine", namespace)
        templates = [r["template"] for r in engine["spec"]["runners"]]
        assert [image_of(t) for t in templates] == ["ome/srt:1.0"]
        await asyncio.sleep(3)  # a pass that would roll the pods has had its chance
        (still,) = await world.pods()
        assert still["metadata"]["uid"] == pod["metadata"]["uid"]
        assert image_of(still) == "ome/srt:1.0"

        # The annotation moves the pin, once; the pods follow.
        patch = {"metadata": {"annotations": {ANNOTATION_RUNTIME_SYNC: "1"}}}
        await kube.patch(INFERENCE_SERVICES, "chat", patch, namespace)
        moved = await eventually(lambda: pinned_to(second), timeout=60, what=f"the pin on {second}")
        assert moved["status"][STATUS_TOKEN] == "1"
        assert support.condition(moved, CONDITION_RUNTIME_DRIFTED) == "False"
        await eventually(lambda: serving("ome/srt:1.1"), timeout=120, what="the pods on 1.1")
