"""Start and stop the local control plane a few times with cached binaries; print JSON.

    .venv/bin/python bench/controlplane.py [--runs 3]

Reports the time from ``ControlPlane.start()`` until every component is healthy (etcd's
``/health``, kube-apiserver's ``/readyz``, kube-controller-manager's and kube-scheduler's
``/healthz``), when each one was, and the time ``stop()`` takes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from omed_devcluster.binaries import ensure_binaries
from omed_devcluster.controlplane import ControlPlane


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    binaries = ensure_binaries()
    starts, stops = [], []
    components: dict[str, list[float]] = {}
    for _ in range(args.runs):
        plane = ControlPlane(binaries)
        began = time.monotonic()
        plane.start()
        starts.append(time.monotonic() - began)
        for name, after in plane.healthy_after.items():
            components.setdefault(name, []).append(after)
        began = time.monotonic()
        plane.stop()
        stops.append(time.monotonic() - began)
    print(
        json.dumps(
            {
                "benchmark": "controlplane",
                "kubernetes": binaries.kubernetes_version,
                "cpus": os.cpu_count(),
                "runs": args.runs,
                "start_seconds": {
                    "median": round(statistics.median(starts), 2),
                    "min": round(min(starts), 2),
                    "max": round(max(starts), 2),
                },
                "healthy_after_seconds_median": {
                    name: round(statistics.median(values), 2) for name, values in components.items()
                },
                "stop_seconds": {"median": round(statistics.median(stops), 2)},
                "load_average": [round(x, 2) for x in os.getloadavg()],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
