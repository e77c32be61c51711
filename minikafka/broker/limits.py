"""Connection limits with Kafka's names: how many clients, from where, and for how long idle.

* ``max.connections`` (whole broker) and ``max.connections.per.ip`` with
  ``max.connections.per.ip.overrides`` (``host:count,...``): a connection beyond a limit is
  closed as soon as it is accepted, with a log line. Kafka does the same for the per-IP limit;
  for the broker-wide limit Kafka instead leaves new connections waiting in the accept backlog
  until a slot frees — minikafka refuses them at once, which a client sees as a failed connect
  and retries.
* ``connections.max.idle.ms``: a connection with no complete request and no response for that
  long is closed. A request in progress (a long-polling Fetch) is not idleness; a frame that
  trickles in byte by byte (slowloris) is, because only complete requests count.

The other bounds live where the bytes are: ``socket.request.max.bytes`` (and
``sasl.server.max.receive.size`` before authentication) cap one frame; a connection reads its
next request only after the previous response is queued and, when more than
:data:`~minikafka.broker.connection.WRITE_HIGH_WATER` bytes wait for a slow reader, drained.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

from minikafka.config import BrokerConfig, list_setting

if TYPE_CHECKING:
    from minikafka.broker.connection import Connection

log = logging.getLogger(__name__)


def _parse_overrides(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in list_setting(text):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        host = host.strip("[] ")
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                address = socket.gethostbyname(host)
            except OSError as exc:
                raise ValueError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None
        out[address] = int(count)
    return out


def peer_ip(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        try:
            return str(ipaddress.ip_address(peer[0]))
        except ValueError:
            return str(peer[0])
    return str(peer)


class ConnectionQuotas:
    """Counts open connections per IP and in total; says whether one more may be served."""

    def __init__(self, config: BrokerConfig) -> None:
        self.max_total = int(config.get("max.connections"))
        self.max_per_ip = int(config.get("max.connections.per.ip"))
        self.overrides = _parse_overrides(str(config.get("max.connections.per.ip.overrides")))
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.refused = 0

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; the reason it is refused (not counted), or None."""
        limit = self.limit_for(ip)
        if self.per_ip.get(ip, 0) >= limit:
            self.refused += 1
            return f"address already has the configured maximum of {limit} connections (max.connections.per.ip)"
        if self.total >= self.max_total:
            self.refused += 1
            return f"the broker already has the configured maximum of {self.max_total} connections (max.connections)"
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        self.total += 1
        return None

    def release(self, ip: str) -> None:
        count = self.per_ip.get(ip, 0) - 1
        if count > 0:
            self.per_ip[ip] = count
        else:
            self.per_ip.pop(ip, None)
        self.total = max(0, self.total - 1)


async def close_idle_connections(config: BrokerConfig, connections: Collection[Connection]) -> None:
    """Background task: close those of the broker's open ``connections`` that are idle for
    ``connections.max.idle.ms`` (see the module doc)."""
    idle_ms = int(config.get("connections.max.idle.ms"))
    if idle_ms < 0:
        return
    period = min(max(idle_ms / 4000, 0.01), 5.0)
    while True:
        await asyncio.sleep(period)
        now = time.monotonic()
        for conn in list(connections):
            if not conn.in_request and not conn.closed and (now - conn.last_active) * 1000 >= idle_ms:
                log.info("closing connection from %s: idle for more than %d ms (connections.max.idle.ms)",
                         conn.peer, idle_ms)
                conn.transport.abort()  # close() would wait for a slow reader to take queued bytes
                conn.close()

