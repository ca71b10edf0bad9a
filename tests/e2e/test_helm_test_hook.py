"""The chart's ``helm test`` hook, run against a manager as the chart deploys it.

The hook is a Pod whose script reaches the webhook Service over TLS to its DNS name, trusting
only the ``ca.crt`` of the webhook certificate's Secret. No container runs here (the node
simulator plays the kubelet and runs nothing), so the test runs the hook's own script, as the
installed release holds it (``helm get hooks``), in a Python process standing in for the
Pod: its Secret volume is a directory holding the Secret's ``ca.crt``, and the cluster's DNS
and Service routing are what the script's name lookup answers: the Service's DNS name
resolves to the address and port of the Service's EndpointSlice, the published webhook port
of the running manager. So what it checks is the chart's: the certificate's names cover the
Service's DNS name, the Secret's CA signs it, the validating webhook's path is served.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MOUNT = "/ca/ca.crt"
"""Where the hook Pod mounts the Secret's ca.crt (its volumeMount and the script's cafile)."""

RESOLVER = """\
import socket, sys
_real = socket.getaddrinfo
HOST, ADDRESS, PORT = sys.argv[1], sys.argv[2], int(sys.argv[3])
def getaddrinfo(host, port, *args, **kwargs):  # the cluster's DNS and the Service's routing
    if host == HOST and int(port) == 443:
        return _real(ADDRESS, PORT, *args, **kwargs)
    return _real(host, port, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
if len(sys.argv) > 4:  # the script's retries, without their 5 s pauses
    import time
    time.sleep = lambda seconds: None
del sys.argv[1:]
"""


def _hook_pod(install: Any) -> dict[str, Any]:
    pods = [
        doc
        for doc in install.hooks()
        if doc.get("kind") == "Pod"
        and doc["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"
    ]
    assert len(pods) == 1, pods
    return pods[0]


def _run_hook(
    pod: dict[str, Any], ca: bytes, tmp_path: Path, route: tuple[str, str, int], *, fast: bool
) -> subprocess.CompletedProcess[str]:
    (container,) = pod["spec"]["containers"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "ca")
    assert f"{mount['mountPath']}/ca.crt" == MOUNT
    (script,) = container["args"]
    assert MOUNT in script
    volume = tmp_path / "ca"
    volume.mkdir(parents=True, exist_ok=True)
    (volume / "ca.crt").write_bytes(ca)
    program = RESOLVER + script.replace(MOUNT, str(volume / "ca.crt"))
    host, address, port = route
    extra = ["fast"] if fast else []
    return subprocess.run(
        [sys.executable, "-c", program, host, address, str(port), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_the_helm_test_hook_reaches_the_webhook_through_its_service(
    managers: Any, control_plane: Any, tmp_path: Path
) -> None:
    manager = managers.start(leader_elect=False)
    await manager.wait_ready(timeout=60)
    install = managers.install
    pod = _hook_pod(install)
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "ca"]
    secret = control_plane.request_json(
        "GET", f"/api/v1/namespaces/{install.namespace}/secrets/{volume['secret']['secretName']}"
    )
    ca = base64.b64decode(secret["data"]["ca.crt"])
    slices = control_plane.request_json(
        "GET",
        f"/apis/discovery.k8s.io/v1/namespaces/{install.namespace}/endpointslices"
        f"?labelSelector=kubernetes.io/service-name={install.webhook_service}",
    )["items"]
    # the EndpointSlice controller's own slice of the Service has no endpoint: no pod runs
    routed = [
        (endpoint, piece["ports"])
        for piece in slices
        for endpoint in piece.get("endpoints") or ()
        if endpoint.get("conditions", {}).get("ready")
    ]
    assert len(routed) == 1, slices
    (endpoint, (port,)) = routed[0]
    host = f"{install.webhook_service}.{install.namespace}.svc"
    route = (host, endpoint["addresses"][0], int(port["port"]))

    passed = _run_hook(pod, ca, tmp_path, route, fast=False)
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.strip() == (
        f"the webhook Service {host} answered GET /validate-ome-io-v1beta1-inferenceservice "
        "with HTTP 405 over TLS"
    )

    # The same script trusting another CA (the control plane's) fails: the check can fail.
    other = await asyncio.to_thread(Path(control_plane.ca_path).read_bytes)
    refused = _run_hook(pod, other, tmp_path / "other", route, fast=True)
    assert refused.returncode == 1
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr, refused.stderr
