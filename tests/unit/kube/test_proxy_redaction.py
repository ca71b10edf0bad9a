"""A proxy URL's password never reaches an error message, a log line or a repr.

Operators write ``HTTPS_PROXY=http://user:password@proxy:3128`` (or a kubeconfig's
``proxy-url``); the password must go to the proxy only, as ``Proxy-Authorization``. Anything
that prints the URL prints it the way Go's ``(*url.URL).Redacted`` does,
``http://user:xxxxx@proxy:3128``; the value used to connect keeps the real password.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from omed.__main__ import main
from omed.kube.client import ClusterConfig, _proxy_and_headers
from omed.kube.proxy import ProxyConfigError, ProxyEnvironment, parse_proxy_url

SECRET = "s3cret"


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    """main() installs its own log handler on the root logger; put pytest's back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("socks5://omed:s3cret@proxy:1080", "socks5://omed:xxxxx@proxy:1080"),
        ("http://omed:s3cret@proxy:notaport", "http://omed:xxxxx@proxy:notaport"),
        ("http://omed:s3cret@:3128", "http://omed:xxxxx@:3128"),
        ("http://omed:s3cret@proxy:0", "http://omed:xxxxx@proxy:0"),
        ("omed:s3cret@proxy:notaport", "omed:xxxxx@proxy:notaport"),  # no scheme
        # An unescaped '/', '#' or '@' in the password: all of it is still hidden.
        ("http://omed:s3c/ret@proxy:3128", "http://omed:xxxxx@proxy:3128"),
        ("http://omed:s3c@ret@proxy:notaport", "http://omed:xxxxx@proxy:notaport"),
        # urlsplit's own error quotes the netloc (NFKC: U+FF03 is '#'): hidden too.
        ("http://omed:s3cret\uff03@proxy:3128", "http://omed:xxxxx@proxy:3128"),
    ],
)
def test_a_proxy_error_shows_the_url_without_its_password(value: str, shown: str) -> None:
    with pytest.raises(ProxyConfigError) as caught:
        ProxyEnvironment.from_environ({"HTTPS_PROXY": value})
    message = str(caught.value)
    assert SECRET not in message and "s3c" not in message, message
    assert message.startswith(f"HTTPS_PROXY {shown!r}: "), message


def test_repr_of_the_proxy_settings_hides_the_password() -> None:
    url = "http://omed:s3cret@proxy.example.com:3128"
    env = ProxyEnvironment.from_environ({"HTTPS_PROXY": url, "HTTP_PROXY": url})
    proxy = env.proxy_for("https://10.96.0.1:443")
    config = ClusterConfig(host="https://10.96.0.1:443", ssl_context=False, proxy=proxy)
    for printed in (repr(env), repr(proxy), repr(config), repr(config.impersonating("u"))):
        assert SECRET not in printed, printed
        assert "omed:xxxxx@proxy.example.com:3128" in printed, printed
    # The value connected with keeps the real password (sent as Proxy-Authorization).
    assert proxy == url and str(proxy) == url and f"{proxy}" == url
    stripped, headers = _proxy_and_headers(config.proxy)
    assert stripped == "http://proxy.example.com:3128"
    assert headers == {"Proxy-Authorization": "Basic b21lZDpzM2NyZXQ="}


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        # What Go 1.26's (*url.URL).Redacted() prints for the same URLs.
        ("http://user:password@proxy:3128", "http://user:xxxxx@proxy:3128"),
        ("http://user@proxy:3128", "http://user@proxy:3128"),  # no password: as it is
        ("http://user:@proxy:3128", "http://user:xxxxx@proxy:3128"),
        ("http://:secret@proxy:3128", "http://:xxxxx@proxy:3128"),
        ("http://user:p%40ss@proxy.example.com:3128", "http://user:xxxxx@proxy.example.com:3128"),
        ("https://us%3Aer:pa:ss@proxy", "https://us%3Aer:xxxxx@proxy"),
        ("http://proxy:3128", "http://proxy:3128"),
    ],
)
def test_redacted_prints_what_go_prints(url: str, redacted: str) -> None:
    from omed.kube.proxy import redact_url

    assert redact_url(url) == redacted
    parsed = parse_proxy_url(url, source="x")
    assert parsed is not None and repr(parsed) == repr(redacted)


def _kubeconfig(tmp_path: Path, proxy_url: str = "") -> Path:
    path = tmp_path / "kubeconfig"
    extra = f", proxy-url: '{proxy_url}'" if proxy_url else ""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'https://10.96.0.1:443'{extra}}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    return path


@pytest.mark.parametrize(
    ("variable", "proxy_url", "shown"),
    [
        (
            "HTTPS_PROXY",
            "",
            "HTTPS_PROXY 'http://omed:xxxxx@proxy.example.com:notaport': the port is not a number",
        ),
        (
            "",
            "socks5://omed:s3cret@proxy.example.com:1080",
            "the cluster's proxy-url 'socks5://omed:xxxxx@proxy.example.com:1080': "
            "the socks5 scheme is not supported",
        ),
    ],
)
def test_the_start_up_log_shows_the_proxy_without_its_password(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *,
    variable: str,
    proxy_url: str,
    shown: str,
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    if variable:
        monkeypatch.setenv(variable, "http://omed:s3cret@proxy.example.com:notaport")
    kubeconfig = _kubeconfig(tmp_path, proxy_url)
    assert main([f"--kubeconfig={kubeconfig}", "--zap-encoder=json"]) == 1
    err = capsys.readouterr().err
    assert SECRET not in err, err
    failure = [line for line in err.splitlines() if '"unable to get kubeconfig"' in line]
    assert len(failure) == 1, err
    assert shown in failure[0], failure[0]
