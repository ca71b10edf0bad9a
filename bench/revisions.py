"""What a pass pays for its update revision: upstream's hash of the pod template.

Why: the revision name is FNV-32a over the template as Go's encoding/json writes it, and a
pass of every InferenceReplica needs it. Encoding a realistic serving pod's template that way
and hashing it byte by byte costs milliseconds in Python, so the controller remembers the
digests per distinct template content. This prints one JSON document: for the realistic
serving pod of the fixtures (``--pod``), the milliseconds of

* ``cold_ms``: the first resolution of a template (the Go encoding, FNV-32a, the data digest
  and the legacy name), as a pass pays it once per template version;
* ``warm_ms``: a pass's resolution of a template already seen (the memo's key is a sorted
  compact dump of the runners);
* ``go_encode_ms``: the Go encoding alone, for reference;

each the median of ``--runs`` runs, with the template's payload size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from omed.controllers.inferencereplica.core import podtemplate
from omed.controllers.inferencereplica.core.model import RunnerShape

FIXTURE = Path("/work/shared/fixtures/ome-serving-pod.json")


def _template(pod: dict[str, Any], tag: int) -> dict[str, Any]:
    spec = json.loads(json.dumps(pod["spec"]))
    spec["containers"][0]["image"] = f"example/serving:{tag}"  # a distinct template each run
    return {"metadata": {"labels": dict(pod["metadata"].get("labels") or {})}, "spec": spec}


def _ms(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pod", type=Path, default=FIXTURE)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    pod = json.loads(args.pod.read_text())
    cold, warm, encode = [], [], []
    for run in range(args.runs):
        runners = (RunnerShape("default", 1, _template(pod, run)),)

        def resolve(shapes: tuple[RunnerShape, ...] = runners) -> None:
            podtemplate.revision_of(isvc="chat", component="engine", runners=shapes, owner_uid="u")

        encode.append(_ms(lambda shapes=runners: podtemplate.payload_of(shapes)))
        cold.append(_ms(resolve))
        warm.append(_ms(resolve))
    payload = podtemplate.payload_of((RunnerShape("default", 1, _template(pod, 0)),))
    print(
        json.dumps(
            {
                "payload_bytes": len(payload),
                "runs": args.runs,
                "cold_ms": round(statistics.median(cold), 3),
                "warm_ms": round(statistics.median(warm), 4),
                "go_encode_ms": round(statistics.median(encode), 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
