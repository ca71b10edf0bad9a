"""HTTPS_PROXY / NO_PROXY as Go reads them (omed.kube.proxy).

The tables follow Go's own tests of ``golang.org/x/net/http/httpproxy`` (the copy vendored
in Go 1.26's standard library, which client-go uses); the expected answers were checked
against that implementation. Where omed deliberately differs (an unusable proxy address is
an error instead of being ignored), the test says so.
"""

from __future__ import annotations

import pytest

from omed.kube.proxy import NoProxy, ProxyConfigError, ProxyEnvironment, parse_proxy_url

GO_NO_PROXY = (
    "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, "
    "10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, "
    "2002:db8:a::45/64"
)


@pytest.mark.parametrize(
    ("host", "proxied"),
    [
        ("localhost", False),  # never proxied
        ("127.0.0.1", False),
        ("127.0.0.2", False),
        ("[::1]", False),
        ("[::2]", True),  # not a loopback address
        ("192.168.1.1", False),  # an exact IPv4 address
        ("192.168.1.2", True),  # the entry names port 81
        ("192.168.1.3", False),  # IPv4:80
        ("192.168.1.4", True),
        ("10.0.0.2", False),  # in 10.0.0.0/30
        ("10.0.0.4", True),  # just outside it
        ("[2001:db8::52:0:1]", False),  # an exact IPv6 address
        ("[2001:db8::52:0:2]", True),  # the entry names port 443
        ("[2001:db8::52:0:3]", False),  # [IPv6]:80
        ("[2002:db8:a::123]", False),  # IPv6 CIDR
        ("[fe80::424b:c8be:1643:a1b6]", True),
        ("barbaz.net", True),  # .barbaz.net: subdomains only
        ("www.barbaz.net", False),
        ("foobar.com", False),  # foobar.com: the domain ...
        ("www.foobar.com", False),  # ... and its subdomains
        ("foofoobar.com", True),  # not a label suffix
        ("baz.com", True),
        ("localhost.net", True),
        ("local.localhost", True),
        ("barbarbaz.net", True),
        ("wildcard.io", True),  # *.wildcard.io: subdomains only
        ("nested.wildcard.io", False),
        ("awildcard.io", True),
        ("FooBar.COM", False),  # case-insensitive
    ],
)
def test_no_proxy_rules_match_go(host: str, proxied: bool) -> None:
    env = ProxyEnvironment.from_environ({"HTTP_PROXY": "proxy", "NO_PROXY": GO_NO_PROXY})
    got = env.proxy_for(f"http://{host}/")
    assert (got == "http://proxy") is proxied, got


@pytest.mark.parametrize(
    ("environ", "url", "want"),
    [
        ({"HTTP_PROXY": "127.0.0.1:8080"}, "http://example.com", "http://127.0.0.1:8080"),
        (
            {"HTTP_PROXY": "cache.corp.example.com:1234"},
            "http://example.com",
            "http://cache.corp.example.com:1234",
        ),
        (
            {"HTTP_PROXY": "cache.corp.example.com"},
            "http://example.com",
            "http://cache.corp.example.com",
        ),
        ({"HTTP_PROXY": "localhost"}, "http://example.com", "http://localhost"),
        (
            {"HTTP_PROXY": "https://cache.corp.example.com"},
            "http://example.com",
            "https://cache.corp.example.com",
        ),
        # HTTPS_PROXY for https, HTTP_PROXY for http, never the other one.
        (
            {"HTTP_PROXY": "http.proxy.tld", "HTTPS_PROXY": "secure.proxy.tld"},
            "http://insecure.tld/",
            "http://http.proxy.tld",
        ),
        (
            {"HTTP_PROXY": "http.proxy.tld", "HTTPS_PROXY": "secure.proxy.tld"},
            "https://secure.tld/",
            "http://secure.proxy.tld",
        ),
        (
            {"HTTP_PROXY": "http.proxy.tld", "HTTPS_PROXY": "https://secure.proxy.tld"},
            "https://secure.tld/",
            "https://secure.proxy.tld",
        ),
        ({"HTTP_PROXY": "http.proxy.tld"}, "https://secure.tld/", None),
        ({"HTTP_PROXY": "http.proxy.tld"}, "ftp://insecure.tld/", None),
        ({}, "http://example.com", None),
        # HTTPS_PROXY is still used under CGI.
        (
            {"HTTPS_PROXY": "https://secure.proxy.tld", "REQUEST_METHOD": "GET"},
            "https://secure.tld/",
            "https://secure.proxy.tld",
        ),
        ({"NO_PROXY": "example.com", "HTTP_PROXY": "proxy"}, "http://example.com/", None),
        (
            {"NO_PROXY": ".example.com", "HTTP_PROXY": "proxy"},
            "http://example.com/",
            "http://proxy",
        ),
        ({"NO_PROXY": "ample.com", "HTTP_PROXY": "proxy"}, "http://example.com/", "http://proxy"),
        ({"NO_PROXY": "example.com", "HTTP_PROXY": "proxy"}, "http://foo.example.com/", None),
        ({"NO_PROXY": ".foo.com", "HTTP_PROXY": "proxy"}, "http://example.com/", "http://proxy"),
        ({"NO_PROXY": ".示例.com", "HTTP_PROXY": "proxy"}, "http://www.示例.com", None),
        ({"NO_PROXY": "xn--fsq092h.com", "HTTP_PROXY": "proxy"}, "http://www.示例.com", None),
        ({"NO_PROXY": "示例.com", "HTTP_PROXY": "proxy"}, "http://www.xn--fsq092h.com", None),
        # A port in a NO_PROXY entry must match the URL's (default 443 for https).
        (
            {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "api.example.com:443"},
            "https://api.example.com/",
            None,
        ),
        (
            {"HTTPS_PROXY": "proxy:3128", "NO_PROXY": "api.example.com:6443"},
            "https://api.example.com/",
            "http://proxy:3128",
        ),
        # The in-cluster case: the API server by its service IP, the service range excluded.
        (
            {"HTTPS_PROXY": "http://proxy.example.com:3128", "NO_PROXY": "10.96.0.0/12"},
            "https://10.96.0.1:443",
            None,
        ),
        (
            {"HTTPS_PROXY": "http://proxy.example.com:3128", "NO_PROXY": ".svc,.cluster.local"},
            "https://10.96.0.1:443",
            "http://proxy.example.com:3128",
        ),
        ({"HTTPS_PROXY": "proxy", "NO_PROXY": "*"}, "https://anything.example.com", None),
        # A bracketed IPv6 address without a port is no IP entry for Go (it can't split it).
        ({"HTTPS_PROXY": "proxy", "NO_PROXY": "[::2]"}, "https://[::2]/", "http://proxy"),
        ({"HTTPS_PROXY": "proxy", "NO_PROXY": "::2"}, "https://[::2]/", None),
        # An entry with no host part is ignored, not a match for everything.
        ({"HTTPS_PROXY": "proxy", "NO_PROXY": ":1"}, "https://example.com", "http://proxy"),
        # Upper case wins over lower case (Go 1.26's standard library).
        (
            {"HTTPS_PROXY": "upper", "https_proxy": "lower"},
            "https://example.com",
            "http://upper",
        ),
        ({"https_proxy": "lower"}, "https://example.com", "http://lower"),
        (
            {"HTTPS_PROXY": "proxy", "no_proxy": "example.com"},
            "https://example.com",
            None,
        ),
    ],
)
def test_proxy_for_url_matches_go(environ: dict[str, str], url: str, want: str | None) -> None:
    assert ProxyEnvironment.from_environ(environ).proxy_for(url) == want


def test_http_proxy_refused_under_cgi() -> None:
    env = ProxyEnvironment.from_environ(
        {"HTTP_PROXY": "http://10.1.2.3:8080", "REQUEST_METHOD": "GET"}
    )
    with pytest.raises(ProxyConfigError, match="CGI"):
        env.proxy_for("http://example.com")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("socks5://127.0.0.1:1080", "socks5 scheme is not supported"),
        ("foo://host", "foo scheme is not supported"),
        ("http://proxy.example.com:notaport", "port is not a number"),
        ("http://:3128", "no host"),
        ("http://proxy.example.com:0", "port 0"),
    ],
)
def test_unusable_proxy_address_is_an_error(value: str, reason: str) -> None:
    # Go ignores an address it can't parse and sends the request directly; omed refuses to
    # start instead of bypassing a proxy the operator asked for.
    with pytest.raises(ProxyConfigError) as caught:
        ProxyEnvironment.from_environ({"HTTPS_PROXY": value})
    assert str(caught.value).startswith(f"HTTPS_PROXY {value!r}: ")
    assert reason in str(caught.value)


def test_the_error_names_the_variable_that_was_read() -> None:
    with pytest.raises(ProxyConfigError, match=r"^https_proxy 'socks5://p'"):
        ProxyEnvironment.from_environ({"https_proxy": "socks5://p"})


def test_parse_proxy_url_keeps_credentials_and_lowers_the_scheme() -> None:
    assert (
        parse_proxy_url("HTTP://user:p%40ss@proxy.example.com:3128", source="x")
        == "http://user:p%40ss@proxy.example.com:3128"
    )
    assert parse_proxy_url("  ", source="x") is None


def test_no_proxy_ignores_empty_entries_and_spaces() -> None:
    rules = NoProxy.parse(" , example.com ,, ")
    assert rules.bypasses("example.com", "443")
    assert not rules.bypasses("example.org", "443")
    assert not NoProxy.parse("").bypasses("example.com", "443")
