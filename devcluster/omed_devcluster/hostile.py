"""The rows of the hostile status, the largest the codec must refuse or decode.

Why one builder: ``bench/hostile_status.py`` measures what these rows cost the leader and
``tests/e2e/test_hostile_status.py`` checks that they stall neither it nor admission; both
must speak of the same rows, so they are built here, once.

Every row is a Ready Instance of one pod whose first condition is ``Ready`` and whose others
(``Extra1``, ``Extra2``, ...) only add cells. Identical rows (one incarnation) make one
ColumnarV2 class, so the columns stay small while the decoded rows grow; distinct
incarnations make every row its own class, the most cells the bounds admit.
"""

from __future__ import annotations

from typing import Any, Final

TIME: Final = "2026-09-14T20:50:00Z"
"""The ``lastTransitionTime`` of every condition."""


def ready_rows(count: int, *, conditions: int, distinct: bool = False) -> list[dict[str, Any]]:
    """``count`` rows (JSON) of ``conditions`` conditions each; ``distinct`` gives row ``i``
    incarnation ``1 + i`` (each its own class), else every row has incarnation 1."""
    return [
        {
            "index": i,
            "incarnation": 1 + (i if distinct else 0),
            "phase": "Ready",
            "podCount": 1,
            "admitted": True,
            "conditions": ready_conditions(conditions),
        }
        for i in range(count)
    ]


def ready_conditions(count: int) -> list[dict[str, Any]]:
    """A row's ``count`` conditions: ``Ready`` first, then ``Extra1``, ``Extra2``, ...,
    each True since :data:`TIME`."""
    return [
        {
            "type": "Ready" if k == 0 else f"Extra{k}",
            "status": "True",
            "observedGeneration": 1,
            "lastTransitionTime": TIME,
            "reason": "InstanceReady",
            "message": "",
        }
        for k in range(count)
    ]
