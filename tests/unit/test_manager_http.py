"""Health probes and metrics: the answers, from the handlers, without binding a socket."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request
from prometheus_client import CollectorRegistry, Gauge

from omed.manager.http import HttpServer, MetricsServer, ProbeServer


def request(path: str, **match_info: str) -> object:
    return make_mocked_request("GET", path, match_info=match_info)


def probes(state: dict[str, str | None]) -> ProbeServer:
    return ProbeServer(
        address="127.0.0.1:0",
        ready_checks={
            "webhook": lambda: state.get("webhook"),
            "leader": lambda: state.get("leader"),
        },
    )


async def test_healthz_is_ok_whatever_readiness_says() -> None:
    server = probes({"leader": "informers have not synced"})
    answer = await server.healthz(request("/healthz"))  # type: ignore[arg-type]
    assert (answer.status, answer.text) == (200, "ok")
    verbose = await server.healthz(request("/healthz?verbose"))  # type: ignore[arg-type]
    assert (verbose.status, verbose.text) == (200, "[+]ping ok\nhealthz check passed\n")


async def test_readyz_is_ok_when_every_check_passes() -> None:
    server = probes({})
    answer = await server.readyz(request("/readyz"))  # type: ignore[arg-type]
    assert (answer.status, answer.text) == (200, "ok")
    verbose = await server.readyz(request("/readyz?verbose"))  # type: ignore[arg-type]
    assert verbose.text == "[+]webhook ok\n[+]leader ok\nreadyz check passed\n"


async def test_readyz_fails_with_the_failing_check_and_its_reason() -> None:
    server = probes({"leader": "informers have not synced"})
    answer = await server.readyz(request("/readyz"))  # type: ignore[arg-type]
    assert answer.status == 500
    assert answer.text == (
        "[+]webhook ok\n[-]leader failed: informers have not synced\nreadyz check failed\n"
    )


async def test_one_check_by_name() -> None:
    server = probes({"leader": "informers have not synced"})
    ok = await server.readyz(request("/readyz/webhook", check="webhook"))  # type: ignore[arg-type]
    assert (ok.status, ok.text) == (200, "ok")
    bad = await server.readyz(request("/readyz/leader", check="leader"))  # type: ignore[arg-type]
    assert bad.status == 500
    unknown = await server.readyz(request("/readyz/nope", check="nope"))  # type: ignore[arg-type]
    assert unknown.status == 404


async def test_a_check_that_raises_fails_readiness_not_the_server() -> None:
    def broken() -> str | None:
        raise RuntimeError("broken check")

    server = ProbeServer(address="127.0.0.1:0", ready_checks={"broken": broken})
    answer = await server.readyz(request("/readyz"))  # type: ignore[arg-type]
    assert answer.status == 500
    assert "[-]broken failed: broken check\n" in str(answer.text)


async def test_metrics_serve_the_registry_in_the_prometheus_text_format() -> None:
    registry = CollectorRegistry()
    Gauge("leader_election_master_status", "doc", ["name"], registry=registry).labels("x").set(1)
    server = MetricsServer(address="127.0.0.1:0", registry=registry)
    answer = await server.metrics(request("/metrics"))  # type: ignore[arg-type]
    assert answer.status == 200
    assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert 'leader_election_master_status{name="x"} 1.0' in str(answer.text)


async def test_address_0_or_empty_turns_a_server_off() -> None:
    for address in ("0", ""):
        server = HttpServer(name="metrics", address=address, routes={})
        assert not server.enabled
        await server.start()  # binds nothing
        assert server.port is None
        await server.stop()
    assert MetricsServer(address=":8080").enabled
