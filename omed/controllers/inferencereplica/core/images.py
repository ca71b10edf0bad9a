"""Whether a container status reports the image its spec names: in-place updates.

Why: an in-place Update patches a running pod's container images; the kubelet then stops
the old container and starts one on the new image. Until it has, the pod is still Ready on
the *old* container, so readiness alone can't say the Instance was updated. The container
status's ``image`` says which image runs, but not in the spec's spelling: the runtime fills
in what the reference leaves implicit (a registry domain, a ``library/`` path for a
single-name image, the ``:latest`` tag), or reports a digest reference only.

Rules (a reference is ``[domain/]path[:tag][@digest]``; its first path component is a
domain when it holds ``.`` or ``:`` or is ``localhost``):

* a domain on one side only is the implicit one: domains are compared only when both name
  one;
* ``library/<name>`` is ``<name>``;
* no tag and no digest means ``:latest``;
* two digests compare as digests;
* a status that shows only a digest (``sha256:<hex>``, or ``path@digest`` without a tag)
  against a spec that names a tag can't be compared: :func:`same_image` answers None and
  the caller falls back to the pod's ``status.observedGeneration``.

Invariant: pure, no registry is ever named or contacted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_BARE_DIGEST: Final = re.compile(r"^(?:[a-z0-9]+:)?[0-9a-f]{32,}$")


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image reference taken apart."""

    domain: str | None
    path: str
    tag: str | None
    digest: str | None


def parse(reference: str) -> ImageRef | None:
    """The parts of ``reference``; None for a bare digest or image id (no name at all)."""
    ref = reference.strip()
    if not ref or _BARE_DIGEST.match(ref):
        return None
    digest: str | None = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    domain: str | None = None
    first, slash, rest = ref.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        domain, ref = first, rest
    tag: str | None = None
    last_slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > last_slash:
        ref, tag = ref[:colon], ref[colon + 1 :]
    path = ref.removeprefix("library/") if ref.count("/") == 1 else ref
    if not path:
        return None
    return ImageRef(domain=domain, path=path, tag=tag, digest=digest or None)


def same_image(spec: str, status: str) -> bool | None:
    """Whether the status's image is the spec's; None when the status can't tell (it shows
    only a digest and the spec names a tag)."""
    if spec == status:
        return True
    wanted = parse(spec)
    running = parse(status)
    if wanted is None:
        return None if running is None else False
    if running is None:
        return None
    both_named = wanted.domain is not None and running.domain is not None
    if wanted.path != running.path or (both_named and wanted.domain != running.domain):
        return False
    if wanted.digest is not None and running.digest is not None:
        return wanted.digest == running.digest
    if running.tag is None and running.digest is not None:
        return None  # a digest reference only: which tag it was pulled by isn't shown
    if wanted.tag is None and wanted.digest is not None:
        return None  # the spec pins a digest the status doesn't show
    return (wanted.tag or "latest") == (running.tag or "latest")
