"""Only the leader exports the status-encoding series. Each case runs in a fresh interpreter:
the metrics live on the process's registry, which the other tests of this session have
already written to."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from omed.controllers.inferencereplica.shell import statusmetrics

SERIES = (
    statusmetrics.ENCODING_GAUGE,
    statusmetrics.CONVERSIONS,
    statusmetrics.DECODE_FAILURES,
    statusmetrics.BYTES_WRITTEN,
    statusmetrics.SIZE_EXCEEDED,
)

# A manager process as a standby has it: every module imported, the controllers built (the
# manager builds them before the election), their workers not started. Then the same
# controller as the leader runs it, until its workers have started.
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    import omed.manager.process  # everything a manager imports
    from omed.controllers.inferencereplica.shell.controller import InferenceReplicaController
    from omed.controllers.inferencereplica.core.model import PlanSettings
    from omed.informers import InformerFactory
    from omed.metrics import REGISTRY

    NAMES = set(sys.argv[1:])

    class Sink:
        def event(self, *args, **kwargs):
            pass

    def samples():
        found = [
            [sample.name, sample.labels, sample.value]
            for family in REGISTRY.collect()
            for sample in family.samples
            if sample.name in NAMES
        ]
        return sorted(found, key=json.dumps)

    async def main():
        controller = InferenceReplicaController(
            client=object(), factory=InformerFactory(object()), events=Sink(),
            settings=PlanSettings(), workers=1,
        )
        standby = samples()
        running = asyncio.create_task(controller.run())
        for _ in range(100):  # the workers start within a few loop turns
            if samples() or running.done():
                break
            await asyncio.sleep(0)
        leader = samples()
        await controller.shutdown(drain=False)
        await running
        print(json.dumps({"standby": standby, "leader": leader}))

    asyncio.run(main())
    """
)


def exported() -> dict[str, list[list[object]]]:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *SERIES],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found: dict[str, list[list[object]]] = json.loads(result.stdout.splitlines()[-1])
    return found


def test_a_standby_exports_no_status_series_and_the_leader_exports_both_encodings() -> None:
    found = exported()
    assert found["standby"] == []
    assert found["leader"] == [
        [statusmetrics.ENCODING_GAUGE, {"encoding": "columnar_v2"}, 0.0],
        [statusmetrics.ENCODING_GAUGE, {"encoding": "dense_v1"}, 0.0],
    ]
