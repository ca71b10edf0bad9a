"""omed.kube.defer_client_imports defers dateutil's ``tz`` package: the kubeconfig loaders'
import leaves its time zones unloaded, and a date parsed afterwards (dateutil's parser, the
ApiClient's date deserializer) gets the same time zone objects as an ordinary import gives."""

from __future__ import annotations

import json
import subprocess
import sys
import time

SCRIPT = """
import datetime, json, sys
import omed.kube
if sys.argv[1] == "deferred":
    omed.kube.defer_client_imports()
import omed.kube.kubeconfig_loaders
before = "dateutil.tz.tz" in sys.modules
from dateutil import parser, tz
from kubernetes_asyncio.client.api_client import ApiClient
parsed = parser.parse("2024-05-06T07:08:09Z")
offset = parser.isoparse("2024-05-06T07:08:09+02:00")
client = ApiClient.__new__(ApiClient)
stamp = client._ApiClient__deserialize_datetime("2024-05-06T07:08:09Z")
print(json.dumps({
    "tz_loaded_by_loaders": before,
    "parsed": [parsed.isoformat(), offset.isoformat(), stamp.isoformat()],
    "tzinfo": [type(d.tzinfo).__qualname__ for d in (parsed, offset, stamp)],
    "from_tz": all(type(d.tzinfo) in vars(tz).values() for d in (parsed, offset, stamp)),
    "offset": offset.utcoffset() == datetime.timedelta(hours=2),
}))
"""


ZONE = "tzlocal" if "UTC" in time.tzname else "tzutc"
"""dateutil's parser gives a ``Z`` date (``UTC`` to it) the local zone where the local zone's
name is ``UTC``."""


def _run(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_deferred_tz_is_loaded_on_first_use_with_the_same_results() -> None:
    deferred, ordinary = _run("deferred"), _run("ordinary")

    assert deferred["tz_loaded_by_loaders"] is False
    assert ordinary["tz_loaded_by_loaders"] is True  # the manager's ordinary import
    assert {k: v for k, v in deferred.items() if k != "tz_loaded_by_loaders"} == {
        "parsed": [
            "2024-05-06T07:08:09+00:00",
            "2024-05-06T07:08:09+02:00",
            "2024-05-06T07:08:09+00:00",
        ],
        "tzinfo": [ZONE, "tzoffset", ZONE],
        "from_tz": True,
        "offset": True,
    }
    assert {k: v for k, v in ordinary.items() if k != "tz_loaded_by_loaders"} == {
        k: v for k, v in deferred.items() if k != "tz_loaded_by_loaders"
    }
