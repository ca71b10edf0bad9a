"""load_config: clear errors for a missing kubeconfig, one temporary directory per process."""

from __future__ import annotations

import base64
import glob
import os
import tempfile
from pathlib import Path

import pytest

from omed.kube import client as kube_client
from omed.kube.client import load_config
from omed_devcluster.certs import CertificateAuthority


def _kubeconfig(path: Path, *, server: str = "https://10.96.0.1:443") -> Path:
    ca = CertificateAuthority.create("test-ca").cert_pem
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}', "
        f"certificate-authority-data: {base64.b64encode(ca).decode()}}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    return path


async def test_a_named_kubeconfig_that_does_not_exist_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=rf"^kubeconfig {missing}: no such file$"):
        await load_config(str(missing), environ={})


async def test_a_kubeconfig_list_needs_one_existing_file(tmp_path: Path) -> None:
    listed = f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"
    with pytest.raises(FileNotFoundError, match=r"^\$KUBECONFIG .*: no such file$"):
        await load_config(environ={"KUBECONFIG": listed})
    _kubeconfig(tmp_path / "b")
    config = await load_config(environ={"KUBECONFIG": listed})
    assert config.host == "https://10.96.0.1:443"


async def test_inline_certificates_share_one_temporary_directory(tmp_path: Path) -> None:
    path = str(_kubeconfig(tmp_path / "kubeconfig"))
    pattern = os.path.join(tempfile.gettempdir(), "omed-kubeconfig-*")
    await load_config(path, environ={})
    before = set(glob.glob(pattern))
    for _ in range(3):
        await load_config(path, environ={})
    assert set(glob.glob(pattern)) == before
    _assert_is_directory(kube_client._temp_dir())


def _assert_is_directory(path: str) -> None:
    assert os.path.isdir(path), path


async def test_the_proxy_comes_from_the_given_environment(tmp_path: Path) -> None:
    path = str(_kubeconfig(tmp_path / "kubeconfig"))
    direct = await load_config(
        path, environ={"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "10.0.0.0/8"}
    )
    assert direct.proxy is None
    proxied = await load_config(path, environ={"HTTPS_PROXY": "proxy:3128"})
    assert proxied.proxy == "http://proxy:3128"
    assert proxied.impersonating("someone").proxy == "http://proxy:3128"


class _Recorded(dict[str, str]):
    """An environment that records the names looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)


def test_the_proxy_variables_are_the_ones_a_proxy_is_read_from() -> None:
    from omed.kube.proxy import ProxyEnvironment

    environ = _Recorded()
    ProxyEnvironment.from_environ(environ)

    # NO_PROXY only exempts hosts and REQUEST_METHOD only refuses HTTP_PROXY: with none of
    # PROXY_VARIABLES set there is no proxy for them to act on.
    assert environ.read - {"NO_PROXY", "no_proxy", "REQUEST_METHOD"} == set(
        kube_client.PROXY_VARIABLES
    )


@pytest.mark.parametrize("name", kube_client.PROXY_VARIABLES)
async def test_each_proxy_variable_alone_sets_the_proxy(tmp_path: Path, name: str) -> None:
    scheme = name.split("_", maxsplit=1)[0].lower()
    path = str(_kubeconfig(tmp_path / "kubeconfig", server=f"{scheme}://10.96.0.1:443"))

    config = await load_config(path, environ={name: "proxy:3128", "NO_PROXY": "example.com"})

    assert config.proxy == "http://proxy:3128"


async def test_without_a_proxy_variable_requests_go_direct(tmp_path: Path) -> None:
    path = str(_kubeconfig(tmp_path / "kubeconfig"))

    config = await load_config(path, environ={"NO_PROXY": "*", "REQUEST_METHOD": "GET"})

    assert config.proxy is None
