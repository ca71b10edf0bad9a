"""Which containers of a pod the simulated kubelet makes fail, and how.

A test (or a demo) asks for a failure in one of three ways, strongest first:

1. the Python API, :meth:`NodeSimulator.inject` -> an :class:`Injection` (by pod name or
   label selector, in one namespace; the latest matching injection wins);
2. the pod's own annotations or labels (annotations win), keys in :data:`ANNOTATIONS`;
3. image rules (:class:`ImageRule`): by default an image containing ``bad-image`` or with
   the tag ``:missing`` cannot be pulled, so an InferenceService with a bad image fails the
   way it would on a real cluster without any test-only labels.

The result is one :class:`ContainerPlan` per container name. Plans are recomputed whenever
the pod or the injections change; the kubelet's state machine applies a changed plan at the
next point where it can take effect (see :meth:`~.kubelet.ContainerSim.set_plan`).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any

from omed_devcluster.sim.durations import parse_duration
from omed_devcluster.sim.selectors import match_label_selector

PREFIX = "sim.omed.dev/"
FAIL = PREFIX + "fail"
"""``ErrImagePull`` (alias ``ImagePullBackOff``), ``CrashLoopBackOff``, ``NeverReady``, or
``None`` (which also overrides image rules)."""
CRASH_AFTER = PREFIX + "crash-after"
"""A duration (``2s``): how long each run of the container lasts before it exits. Alone it
means ``CrashLoopBackOff``."""
EXIT_CODE = PREFIX + "exit-code"
"""The exit code of a crashing container (default 1)."""
FAIL_CONTAINERS = PREFIX + "fail-containers"
"""Comma-separated container names the failure applies to (default: every container)."""
READY_DELAY = PREFIX + "ready-delay"
"""A duration: how long after it starts a container turns ready (a slow model load)."""
TERMINATION_DELAY = PREFIX + "termination-delay"
"""A duration: how long the containers take to exit once the pod is deleted (at most the
pod's grace period)."""
ANNOTATIONS = (FAIL, CRASH_AFTER, EXIT_CODE, FAIL_CONTAINERS, READY_DELAY, TERMINATION_DELAY)


class Failure(enum.StrEnum):
    NONE = "None"
    IMAGE_PULL = "ErrImagePull"
    CRASH_LOOP = "CrashLoopBackOff"
    NEVER_READY = "NeverReady"

    @classmethod
    def parse(cls, value: str | Failure) -> Failure:
        if isinstance(value, Failure):
            return value
        text = value.strip().lower()
        aliases = {"imagepullbackoff": cls.IMAGE_PULL, "": cls.NONE, "none": cls.NONE}
        if text in aliases:
            return aliases[text]
        for member in cls:
            if member.value.lower() == text:
                return member
        names = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown failure {value!r} (one of {names}, ImagePullBackOff)")


@dataclasses.dataclass(frozen=True)
class ContainerPlan:
    """How one container behaves: its failure and the timings that shape it."""

    failure: Failure = Failure.NONE
    crash_after: float | None = None
    """Seconds each run lasts (CrashLoopBackOff); None: the simulator's default."""
    exit_code: int = 1
    ready_delay: float | None = None
    """Seconds from start to ready; None: the simulator's default."""


@dataclasses.dataclass(frozen=True)
class ImageRule:
    """Images matching ``pattern`` (a regular expression, searched) fail with ``failure``."""

    pattern: str
    failure: Failure = Failure.IMAGE_PULL

    def matches(self, image: str) -> bool:
        return re.search(self.pattern, image) is not None


DEFAULT_IMAGE_RULES: tuple[ImageRule, ...] = (
    ImageRule(r"bad-image"),
    ImageRule(r":missing$"),
)


@dataclasses.dataclass(frozen=True)
class Injection:
    """A failure asked for through the Python API, for pods matched by name or selector."""

    namespace: str
    failure: Failure
    name: str | None = None
    selector: Mapping[str, Any] | None = None
    """A ``metav1.LabelSelector`` (``{"matchLabels": {...}}``) or plain ``{label: value}``."""
    crash_after: float | None = None
    exit_code: int = 1
    containers: frozenset[str] | None = None

    def matches(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") != self.namespace:
            return False
        if self.name is not None:
            return bool(meta.get("name") == self.name)
        selector = self.selector or {}
        if "matchLabels" not in selector and "matchExpressions" not in selector:
            selector = {"matchLabels": selector}
        return match_label_selector(selector, meta.get("labels") or {})


@dataclasses.dataclass(frozen=True)
class PodPlans:
    """Per-container plans, the pod's termination delay, and what could not be parsed."""

    containers: Mapping[str, ContainerPlan]
    termination_delay: float | None = None
    problems: tuple[str, ...] = ()


def _setting(meta: Mapping[str, Any], key: str) -> str | None:
    for source in ("annotations", "labels"):
        value = (meta.get(source) or {}).get(key)
        if value is not None:
            return str(value)
    return None


def plan_pod(
    pod: Mapping[str, Any],
    *,
    injections: Sequence[Injection] = (),
    image_rules: Sequence[ImageRule] = DEFAULT_IMAGE_RULES,
) -> PodPlans:
    """Resolve every container's plan (init containers included) for one pod."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    problems: list[str] = []

    def duration(key: str) -> float | None:
        text = _setting(meta, key)
        if text is None:
            return None
        try:
            return parse_duration(text)
        except ValueError:
            problems.append(f"{key}: not a duration: {text!r}")
            return None

    crash_after = duration(CRASH_AFTER)
    ready_delay = duration(READY_DELAY)
    termination_delay = duration(TERMINATION_DELAY)
    exit_code = 1
    if (text := _setting(meta, EXIT_CODE)) is not None:
        try:
            exit_code = int(text)
        except ValueError:
            problems.append(f"{EXIT_CODE}: not an integer: {text!r}")
    declared: Failure | None = None
    if (text := _setting(meta, FAIL)) is not None:
        try:
            declared = Failure.parse(text)
        except ValueError as err:
            problems.append(f"{FAIL}: {err}")
    if declared is None and crash_after is not None:
        declared = Failure.CRASH_LOOP
    targets: frozenset[str] | None = None
    if (text := _setting(meta, FAIL_CONTAINERS)) is not None:
        targets = frozenset(n.strip() for n in text.split(",") if n.strip())
    injection = next((i for i in reversed(injections) if i.matches(pod)), None)

    plans: dict[str, ContainerPlan] = {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        name = container.get("name") or ""
        image = container.get("image") or ""
        plan = ContainerPlan(ready_delay=ready_delay, crash_after=crash_after, exit_code=exit_code)
        if injection is not None and (injection.containers is None or name in injection.containers):
            plan = dataclasses.replace(
                plan,
                failure=injection.failure,
                crash_after=injection.crash_after
                if injection.crash_after is not None
                else crash_after,
                exit_code=injection.exit_code,
            )
        elif declared is not None and (targets is None or name in targets):
            plan = dataclasses.replace(plan, failure=declared)
        else:
            rule = next((r for r in image_rules if r.matches(image)), None)
            if rule is not None:
                plan = dataclasses.replace(plan, failure=rule.failure)
        plans[name] = plan
    return PodPlans(plans, termination_delay, tuple(problems))
