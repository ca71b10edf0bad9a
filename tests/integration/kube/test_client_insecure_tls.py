"""A kubeconfig cluster with ``insecure-skip-tls-verify`` and a user with a client certificate,
against the real API server: the server's certificate is not checked, and the user is still
authenticated by its certificate, as kubectl does it (an anonymous request would be refused:
the test API server does not authorise ``system:anonymous`` to list namespaces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from omed.kube.client import KubeClient, load_config
from omed.kube.errors import ApiError
from omed.kube.resources import NAMESPACES

pytestmark = pytest.mark.integration


def _insecure(admin: dict[str, Any], *, with_user_cert: bool) -> dict[str, Any]:
    for cluster in admin["clusters"]:
        cluster["cluster"].pop("certificate-authority", None)
        cluster["cluster"].pop("certificate-authority-data", None)
        cluster["cluster"]["insecure-skip-tls-verify"] = True
    if not with_user_cert:
        for user in admin["users"]:
            user["user"] = {}
    return admin


async def test_an_insecure_cluster_still_presents_the_users_certificate(
    control_plane: Any, tmp_path: Path
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_insecure(control_plane.kubeconfig(), with_user_cert=True)))
    async with KubeClient(await load_config(str(path), environ={}), timeout=10) as client:
        listed = await client.list_page(NAMESPACES)
    assert any(item["metadata"]["name"] == "default" for item in listed["items"])


async def test_without_a_certificate_the_same_request_is_refused(
    control_plane: Any, tmp_path: Path
) -> None:
    """The check above can fail: the same insecure cluster without the user's certificate is
    an anonymous request, which the API server refuses."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(_insecure(control_plane.kubeconfig(), with_user_cert=False)))
    async with KubeClient(await load_config(str(path), environ={}), timeout=10) as client:
        with pytest.raises(ApiError) as refused:
            await client.list_page(NAMESPACES)
    assert refused.value.status in (401, 403)
