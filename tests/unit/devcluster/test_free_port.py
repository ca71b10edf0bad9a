"""The launcher's listener ports: distinct, outside the ephemeral range, and not taken.

A port from port 0 lies in the kernel's ephemeral range, which outgoing connections draw
from too, so a client could take it before the manager binds it (a test once failed on
``address already in use`` that way). These pin the rule that prevents it.
"""

from __future__ import annotations

import socket
from pathlib import Path

from omed_devcluster.controlplane import LISTEN_PORTS, free_port


def test_ports_are_distinct_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(port in LISTEN_PORTS and port < low for port in ports)


def test_a_port_someone_listens_on_is_skipped() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe = free_port()
        taken.bind(("127.0.0.1", probe + 1))
        taken.listen()
        assert free_port() != probe + 1
