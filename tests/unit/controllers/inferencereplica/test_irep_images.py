"""Whether a pod's containers run the images its spec names: the fact an in-place Update
waits for (:mod:`omed.controllers.inferencereplica.core.images`, ``observe.runs_spec_images``).

No registry is named here: "reg.example" stands for any registry domain.
"""

from __future__ import annotations

from typing import Any

import pytest

from omed.controllers.inferencereplica.core.images import ImageRef, parse, same_image
from omed.controllers.inferencereplica.core.observe import pod_view, runs_spec_images

DIGEST = "sha256:" + "ab" * 32
OTHER_DIGEST = "sha256:" + "cd" * 32


def test_parse_takes_a_reference_apart() -> None:
    assert parse("ome/srt:2.0") == ImageRef(None, "ome/srt", "2.0", None)
    assert parse("reg.example/ome/srt:2.0") == ImageRef("reg.example", "ome/srt", "2.0", None)
    assert parse("localhost/srt") == ImageRef("localhost", "srt", None, None)
    assert parse("reg.example:5000/srt:1@" + DIGEST) == ImageRef(
        "reg.example:5000", "srt", "1", DIGEST
    )
    assert parse("library/nginx") == ImageRef(None, "nginx", None, None)
    assert parse("nginx:1.27") == ImageRef(None, "nginx", "1.27", None)
    assert parse(DIGEST) is None
    assert parse("ab" * 32) is None
    assert parse("") is None


@pytest.mark.parametrize(
    ("spec", "status"),
    [
        ("ome/srt:2.0", "ome/srt:2.0"),
        ("ome/srt:2.0", "reg.example/ome/srt:2.0"),  # the implicit domain filled in
        ("nginx", "reg.example/library/nginx:latest"),  # library/ and :latest implicit
        ("nginx:1.27", "library/nginx:1.27"),
        ("reg.example/ome/srt:2.0", "ome/srt:2.0"),  # a runtime that shortens names
        ("reg.example:5000/srt", "reg.example:5000/srt:latest"),
        ("localhost/srt:1", "localhost/srt:1"),
        ("ome/srt@" + DIGEST, "reg.example/ome/srt@" + DIGEST),
        ("ome/srt:2.0@" + DIGEST, "ome/srt@" + DIGEST),
    ],
)
def test_the_same_image_spelled_differently(spec: str, status: str) -> None:
    assert same_image(spec, status) is True


@pytest.mark.parametrize(
    ("spec", "status"),
    [
        ("ome/srt:2.0", "ome/srt:1.0"),  # the old container still runs
        ("ome/srt:2.0", "reg.example/ome/srt:1.0"),
        ("ome/srt", "ome/srt:1.0"),  # implicit :latest is not 1.0
        ("reg.example/ome/srt:2.0", "reg.other/ome/srt:2.0"),
        ("ome/srt:2.0", "ome/other:2.0"),
        ("nginx", "reg.example/other/nginx:latest"),
        ("ome/srt@" + DIGEST, "ome/srt@" + OTHER_DIGEST),
    ],
)
def test_different_images(spec: str, status: str) -> None:
    assert same_image(spec, status) is False


@pytest.mark.parametrize(
    ("spec", "status"),
    [
        ("ome/srt:2.0", DIGEST),  # an image id only
        ("ome/srt:2.0", "reg.example/ome/srt@" + DIGEST),  # a digest reference only
        ("ome/srt@" + DIGEST, "ome/srt:2.0"),  # pinned by digest, shown by tag
    ],
)
def test_a_status_that_cannot_tell(spec: str, status: str) -> None:
    assert same_image(spec, status) is None


def pod(
    spec_image: str,
    status_image: str | None,
    *,
    generation: int | None = 2,
    observed: int | None = 1,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": "chat-engine-0-default-0",
            "uid": "u1",
            "labels": {"ome.io/instance-index": "0"},
        },
        "spec": {"containers": [{"name": "main", "image": spec_image}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": []
            if status_image is None
            else [{"name": "main", "image": status_image, "ready": True, "restartCount": 0}],
        },
    }
    if generation is not None:
        body["metadata"]["generation"] = generation
    if observed is not None:
        body["status"]["observedGeneration"] = observed
    return body


def test_a_patched_pod_runs_the_old_image_until_the_status_shows_the_new_one() -> None:
    patched = pod("ome/srt:2.0", "reg.example/ome/srt:1.0", observed=2)
    assert runs_spec_images(patched) is False  # the kubelet saw the patch; not restarted yet
    view = pod_view(patched, replica="chat-engine")
    assert view.ready and not view.runs_spec_images
    restarted = pod("ome/srt:2.0", "reg.example/ome/srt:2.0", observed=1)
    assert runs_spec_images(restarted) is True  # the image says it, whatever the generation


def test_a_digest_only_status_falls_back_to_the_observed_generation() -> None:
    assert runs_spec_images(pod("ome/srt:2.0", DIGEST, generation=2, observed=1)) is False
    assert runs_spec_images(pod("ome/srt:2.0", DIGEST, generation=2, observed=2)) is True
    assert runs_spec_images(pod("ome/srt:2.0", DIGEST, generation=None, observed=None)) is True


def test_a_container_without_a_status_falls_back_to_the_observed_generation() -> None:
    assert runs_spec_images(pod("ome/srt:2.0", None, generation=2, observed=1)) is False
    assert runs_spec_images(pod("ome/srt:2.0", None, generation=2, observed=2)) is True


def test_every_container_counts() -> None:
    body = pod("ome/srt:2.0", "ome/srt:2.0")
    body["spec"]["containers"].append({"name": "sidecar", "image": "ome/side:2"})
    body["status"]["containerStatuses"].append({"name": "sidecar", "image": "ome/side:1"})
    assert runs_spec_images(body) is False
    body["status"]["containerStatuses"][1]["image"] = "ome/side:2"
    assert runs_spec_images(body) is True
