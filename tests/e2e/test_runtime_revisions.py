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

import datetime as dt
import time
from typing import Any

import pytest
from _support import eventually, serving_runtime
from test_kubectl_ome import kubectl

from omed.api.constants import ANNOTATION_GC_ELIGIBLE_SINCE, LABEL_RUNTIME_OF
from omed.controllers.runtimerevision.core.snapshot import content_hash
from omed.kube.client import KubeClient
from omed.kube.resources import CONTROLLER_REVISIONS, INFERENCE_SERVICES, SERVING_RUNTIMES

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
    assert sorted(name for name in left if name.startswith(f"r-{namespace}-")) == sorted(
        [pinned, newer, current]
    )
    assert all(mark_of(left[name]) is None for name in (pinned, newer, current))
    assert deleted_at >= marked_at + GRACE
    assert deleted_at < restarted_at + GRACE, (
        f"deleted {deleted_at - marked_at:.1f} s after the mark and "
        f"{deleted_at - restarted_at:.1f} s after the restart: the grace period restarted"
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
