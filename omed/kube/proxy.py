"""Which proxy, if any, a request to the API server goes through: Go's rules, in Python.

Why: operators set ``HTTPS_PROXY`` and ``NO_PROXY`` on the manager pod (``extraEnv``) the
way they do for every Go controller, and expect Go's standard form: the manager sends
requests through the proxy in ``HTTPS_PROXY``, except to the hosts, domains and
CIDR ranges that ``NO_PROXY`` lists. Python's own ``urllib`` rules differ (no CIDR ranges,
other wildcard and port rules), so this module follows Go's ``httpproxy.FromEnvironment``
(what client-go uses) rule for rule:

* ``HTTPS_PROXY`` (or ``https_proxy``) for ``https`` URLs, ``HTTP_PROXY`` (or ``http_proxy``)
  for ``http`` URLs; the upper-case name wins; ``HTTPS_PROXY`` is not used for ``http`` nor
  the reverse. Under CGI (``REQUEST_METHOD`` set) ``HTTP_PROXY`` is refused.
* A proxy address without a scheme means ``http://`` (``proxy.example.com:3128``).
* Never proxied: ``localhost`` and loopback addresses.
* ``NO_PROXY``: comma-separated; ``*`` matches everything; ``10.96.0.0/12`` a CIDR range;
  ``10.96.0.1`` an IP address; ``example.com`` that domain and its subdomains;
  ``.example.com`` and ``*.example.com`` subdomains only; any entry may end in ``:port`` to
  match that port only. Entries are case-insensitive; empty ones are ignored.

One deliberate difference: Go silently ignores a proxy address it can't parse and sends the
request directly; here it is an error (:class:`ProxyConfigError`), so the manager stops at
start with the reason instead of bypassing a proxy the operator asked for. ``socks5`` proxies
(which Go supports) are refused the same way: the HTTP client can't speak SOCKS.

A kubeconfig cluster's ``proxy-url`` overrides all of this, as in client-go
(:func:`omed.kube.client.load_config`).

A proxy URL may carry a password (``http://user:password@proxy:3128``). It goes to the proxy
only, as ``Proxy-Authorization``; whatever prints the URL prints it as Go's
``(*url.URL).Redacted`` does, ``http://user:xxxxx@proxy:3128`` (:func:`redact_url`): the
errors here, and the ``repr`` of every object that holds one, since the URLs this module
returns are :class:`ProxyURL` strings. Their ``str`` is the real URL, the one to connect
with: log ``url.redacted()``, never the URL itself.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import SplitResult, urlsplit

SUPPORTED_SCHEMES: Final = frozenset({"http", "https"})
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}


REDACTED: Final = "xxxxx"
"""What a password is printed as (Go's ``Redacted``)."""
_SCHEME: Final = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")


class ProxyConfigError(ValueError):
    """A proxy setting that can't be used (its variable, its value and why); the value is
    shown without its password."""


def redact_url(text: str) -> str:
    """``text`` with the password of its user info printed as ``xxxxx``, as Go's
    ``(*url.URL).Redacted`` prints it (``http://user:xxxxx@proxy:3128``); a user name
    without a password is shown, as Go shows it.

    ``text`` need not parse (error messages show what the operator wrote): everything
    before the last ``@`` counts as user info, so a password with an unescaped ``/``,
    ``#`` or ``@`` in it is still hidden whole.
    """
    prefix, user, password, rest = _userinfo(text)
    if password is None:
        return text
    return f"{prefix}{user}:{REDACTED}@{rest}"


def _userinfo(text: str) -> tuple[str, str, str | None, str]:
    """(scheme and ``//``, user name, password or ``None``, what follows the ``@``)."""
    match = _SCHEME.match(text)
    prefix = match.group(0) if match else ""
    userinfo, at, rest = text[len(prefix) :].rpartition("@")
    if not at:
        return prefix, "", None, rest
    user, colon, password = userinfo.partition(":")
    return prefix, user, password if colon else None, rest


def _hide_password(message: str, value: str) -> str:
    """``message`` (which may quote ``value`` in any form) without ``value``'s password."""
    password = _userinfo(value)[2]
    return message.replace(password, REDACTED) if password else message


class ProxyURL(str):
    """A proxy URL: its ``str`` is the URL to connect with, password included; its ``repr``
    is :func:`redact_url`'s, so a config object that holds it prints no password."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(self.redacted())

    def redacted(self) -> str:
        return redact_url(str(self))


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclasses.dataclass(frozen=True)
class _IPMatch:
    ip: IPAddress
    port: str

    def matches(self, ip: IPAddress, port: str) -> bool:
        return ip == self.ip and (not self.port or self.port == port)


@dataclasses.dataclass(frozen=True)
class _DomainMatch:
    suffix: str  # always starts with "."
    port: str
    match_host: bool  # the bare domain matches too, not only its subdomains

    def matches(self, host: str, port: str) -> bool:
        if host.endswith(self.suffix) or (self.match_host and host == self.suffix[1:]):
            return not self.port or self.port == port
        return False


@dataclasses.dataclass(frozen=True)
class NoProxy:
    """A parsed ``NO_PROXY`` list."""

    everything: bool = False
    networks: tuple[IPNetwork, ...] = ()
    ips: tuple[_IPMatch, ...] = ()
    domains: tuple[_DomainMatch, ...] = ()

    @classmethod
    def parse(cls, text: str) -> NoProxy:
        networks: list[IPNetwork] = []
        ips: list[_IPMatch] = []
        domains: list[_DomainMatch] = []
        for raw in text.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return cls(everything=True)
            if "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                    continue
                except ValueError:
                    pass  # Go then tries it as a host name; so do we
            host, port = _split_host_port(entry)
            if not host:
                continue  # ":80" and the like: malformed, ignored (as Go does)
            ip = _ip(host)
            if ip is not None:
                ips.append(_IPMatch(ip=ip, port=port))
                continue
            if host.startswith("*."):
                host = host[1:]
            match_host = not host.startswith(".")
            suffix = host if not match_host else "." + host
            domains.append(_DomainMatch(suffix=_idna(suffix), port=port, match_host=match_host))
        return cls(networks=tuple(networks), ips=tuple(ips), domains=tuple(domains))

    def bypasses(self, host: str, port: str) -> bool:
        """The request to ``host:port`` goes direct (``host`` lower-case, no brackets)."""
        if self.everything:
            return True
        ip = _ip(host)
        if ip is not None:
            if any(ip in network for network in self.networks):
                return True
            return any(match.matches(ip, port) for match in self.ips)
        return any(match.matches(host, port) for match in self.domains)


@dataclasses.dataclass(frozen=True)
class ProxyEnvironment:
    """``HTTP_PROXY``, ``HTTPS_PROXY`` and ``NO_PROXY`` as Go reads them."""

    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: NoProxy = dataclasses.field(default_factory=NoProxy)
    cgi: bool = False

    def __post_init__(self) -> None:
        # Held as ProxyURL, however they were given, so that the repr hides passwords.
        for name in ("http_proxy", "https_proxy"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, ProxyURL):
                object.__setattr__(self, name, ProxyURL(value))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> ProxyEnvironment:
        """Read the variables; raise :class:`ProxyConfigError` for an address that can't be
        used."""
        http_name, http_value = _first(environ, "HTTP_PROXY", "http_proxy")
        https_name, https_value = _first(environ, "HTTPS_PROXY", "https_proxy")
        _, no_proxy = _first(environ, "NO_PROXY", "no_proxy")
        return cls(
            http_proxy=parse_proxy_url(http_value, source=http_name),
            https_proxy=parse_proxy_url(https_value, source=https_name),
            no_proxy=NoProxy.parse(no_proxy),
            cgi=bool(environ.get("REQUEST_METHOD")),
        )

    def proxy_for(self, url: str) -> ProxyURL | None:
        """The proxy URL for a request to ``url``, or ``None`` to go direct."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme == "https":
            proxy = self.https_proxy
        elif scheme == "http":
            proxy = self.http_proxy
            if proxy is not None and self.cgi:
                raise ProxyConfigError(
                    "refusing to use HTTP_PROXY in a CGI environment (REQUEST_METHOD is set)"
                )
        else:
            return None
        if proxy is None:
            return None
        host = (parts.hostname or "").lower()
        port = _port(parts, scheme)
        if not host or host == "localhost":
            return None if host else ProxyURL(proxy)
        ip = _ip(host)
        if ip is not None and ip.is_loopback:
            return None
        if self.no_proxy.bypasses(_idna(host), port):
            return None
        return ProxyURL(proxy)


def parse_proxy_url(value: str, *, source: str) -> ProxyURL | None:
    """A proxy address as Go reads it (no scheme means ``http://``), checked; ``None`` for
    an empty value. ``source`` names where it came from, for the error, which shows the
    value without its password."""
    text = value.strip()
    if not text:
        return None
    shown = f"{source} {redact_url(value)!r}"
    parts = _split(text, shown, value)
    if not parts.scheme or not parts.netloc:
        parts = _split("http://" + text, shown, value)
    scheme = parts.scheme.lower()
    if scheme not in SUPPORTED_SCHEMES:
        raise ProxyConfigError(
            f"{shown}: the {scheme or 'missing'} scheme is not supported (use http:// or https://)"
        )
    try:
        port = parts.port
    except ValueError:
        raise ProxyConfigError(f"{shown}: the port is not a number") from None
    if not parts.hostname:
        raise ProxyConfigError(f"{shown}: no host")
    if port == 0:
        raise ProxyConfigError(f"{shown}: port 0")
    return ProxyURL(parts._replace(scheme=scheme).geturl())


def _split(text: str, shown: str, value: str) -> SplitResult:
    try:
        return urlsplit(text)
    except ValueError as err:  # its message may quote the netloc, password and all
        raise ProxyConfigError(f"{shown}: {_hide_password(str(err), value)}") from None


def _first(environ: Mapping[str, str], *names: str) -> tuple[str, str]:
    for name in names:
        value = environ.get(name)
        if value:
            return name, value
    return names[0], ""


def _split_host_port(entry: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort`` for a NO_PROXY entry: ``host:port`` or ``[v6]:port``; an
    entry it can't split (no port, a bare IPv6 address, ``[v6]`` alone) is all host."""
    if entry.startswith("["):
        end = entry.find("]")
        if end < 0 or entry[end + 1 : end + 2] != ":":
            return entry, ""
        host, port = entry[1:end], entry[end + 2 :]
    else:
        host, colon, port = entry.rpartition(":")
        if not colon or ":" in host:
            return entry, ""
    if any(c in host or c in port for c in "[]"):
        return entry, ""
    return host, port


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _port(parts: SplitResult, scheme: str) -> str:
    try:
        port = parts.port
    except ValueError:
        port = None
    return str(port) if port is not None else _DEFAULT_PORTS[scheme]


def _idna(host: str) -> str:
    """``host`` in its ASCII (punycode) form, keeping a leading dot; unchanged when it is
    ASCII already or not a valid name."""
    if host.isascii():
        return host
    dot = "." if host.startswith(".") else ""
    try:
        return dot + host[len(dot) :].encode("idna").decode("ascii")
    except UnicodeError:
        return host
