"""Failure plans: injections over annotations over labels over image rules."""

from __future__ import annotations

from typing import Any

import pytest

from omed_devcluster.sim.failures import (
    CRASH_AFTER,
    EXIT_CODE,
    FAIL,
    FAIL_CONTAINERS,
    READY_DELAY,
    TERMINATION_DELAY,
    Failure,
    ImageRule,
    Injection,
    plan_pod,
)


def make_pod(
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    images: tuple[str, ...] = ("ome/serving:1.0", "ome/sidecar:1.0"),
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "annotations": annotations or {},
            "labels": labels or {},
        },
        "spec": {"containers": [{"name": f"c{i}", "image": img} for i, img in enumerate(images)]},
    }


def failures(pod: dict[str, Any], **kwargs: Any) -> dict[str, Failure]:
    return {name: plan.failure for name, plan in plan_pod(pod, **kwargs).containers.items()}


def test_healthy_by_default() -> None:
    assert failures(make_pod()) == {"c0": Failure.NONE, "c1": Failure.NONE}


@pytest.mark.parametrize(
    ("value", "failure"),
    [
        ("ErrImagePull", Failure.IMAGE_PULL),
        ("ImagePullBackOff", Failure.IMAGE_PULL),
        ("crashloopbackoff", Failure.CRASH_LOOP),
        ("NeverReady", Failure.NEVER_READY),
        ("None", Failure.NONE),
    ],
)
def test_annotation(value: str, failure: Failure) -> None:
    assert set(failures(make_pod(annotations={FAIL: value})).values()) == {failure}


def test_label_works_and_annotation_wins() -> None:
    assert set(failures(make_pod(labels={FAIL: "NeverReady"})).values()) == {Failure.NEVER_READY}
    pod = make_pod(labels={FAIL: "NeverReady"}, annotations={FAIL: "CrashLoopBackOff"})
    assert set(failures(pod).values()) == {Failure.CRASH_LOOP}


def test_crash_after_alone_means_crash_loop() -> None:
    plans = plan_pod(make_pod(annotations={CRASH_AFTER: "2s", EXIT_CODE: "42"})).containers
    assert plans["c0"].failure is Failure.CRASH_LOOP
    assert plans["c0"].crash_after == 2.0
    assert plans["c0"].exit_code == 42


def test_fail_containers_limits_the_failure() -> None:
    pod = make_pod(annotations={FAIL: "NeverReady", FAIL_CONTAINERS: "c1"})
    assert failures(pod) == {"c0": Failure.NONE, "c1": Failure.NEVER_READY}


@pytest.mark.parametrize("image", ["ome/bad-image:1.0", "ome/serving:missing"])
def test_default_image_rules(image: str) -> None:
    pod = make_pod(images=(image, "ome/serving:1.0"))
    assert failures(pod) == {"c0": Failure.IMAGE_PULL, "c1": Failure.NONE}


def test_not_missing_is_fine() -> None:
    assert failures(make_pod(images=("ome/serving:missing-not",))) == {"c0": Failure.NONE}


def test_annotation_none_overrides_image_rules_and_custom_rules_apply() -> None:
    pod = make_pod(images=("ome/bad-image:1",), annotations={FAIL: "None"})
    assert failures(pod) == {"c0": Failure.NONE}
    rules = (ImageRule(r"crashy", Failure.CRASH_LOOP),)
    assert failures(make_pod(images=("ome/crashy:1",)), image_rules=rules) == {
        "c0": Failure.CRASH_LOOP
    }


def test_latest_matching_injection_wins() -> None:
    pod = make_pod(annotations={FAIL: "NeverReady"}, labels={"app": "chat"})
    injections = [
        Injection(namespace="ns", failure=Failure.CRASH_LOOP, name="p", crash_after=1.0),
        Injection(namespace="ns", failure=Failure.IMAGE_PULL, selector={"app": "chat"}),
        Injection(namespace="other", failure=Failure.NONE, name="p"),
        Injection(namespace="ns", failure=Failure.NONE, selector={"app": "router"}),
    ]
    assert set(failures(pod, injections=injections).values()) == {Failure.IMAGE_PULL}
    assert set(failures(pod, injections=injections[:1]).values()) == {Failure.CRASH_LOOP}
    selector = {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
    only_c1 = Injection(
        namespace="ns", failure=Failure.CRASH_LOOP, selector=selector, containers=frozenset({"c1"})
    )
    assert failures(pod, injections=[only_c1]) == {
        "c0": Failure.NEVER_READY,
        "c1": Failure.CRASH_LOOP,
    }


def test_delays_and_problems() -> None:
    pod = make_pod(
        annotations={READY_DELAY: "1m", TERMINATION_DELAY: "500ms", EXIT_CODE: "x", FAIL: "Boom"}
    )
    plans = plan_pod(pod)
    assert plans.containers["c0"].ready_delay == 60.0
    assert plans.termination_delay == 0.5
    assert plans.containers["c0"].failure is Failure.NONE
    assert len(plans.problems) == 2
    assert any(EXIT_CODE in p for p in plans.problems)


def test_unknown_failure_name() -> None:
    with pytest.raises(ValueError, match="unknown failure"):
        Failure.parse("Explode")
