"""Cutting a cluster's broker off the network, from outside the broker: a partition test's tool.

The brokers of a cluster replicate over the Kafka protocol on loopback: a follower's fetcher
(:mod:`minikafka.broker.cluster.fetcher`) sends Fetch with the client id
``replica-fetcher-<its node id>``. Every broker of a cluster under the test kit gets an
:class:`IsolationInterceptor` as its request interceptor (the one hook the broker offers, see
:mod:`minikafka.broker.interceptor`), and all of them read one :class:`Isolation`, so a cut is
seen from both ends:

- ``brokers``: the broker neither serves the other brokers' fetches nor gets its own served (a
  fetch already waiting at the leader loses its answer too); once the leader has records such a
  follower lacks, it leaves the ISR after ``replica.lag.time.max.ms`` (as in Kafka, a follower at
  the leader's log end stays in sync without fetching). An isolated leader sees its ISR shrink the
  same way, so acks=all writes time out, then are refused with NOT_ENOUGH_REPLICAS below
  ``min.insync.replicas``.
- ``clients``: every connection that is not another broker's is closed at its first request
  (a new connection, or the next request on one already open).
- ``controller``: the broker's link to the controller is cut
  (:meth:`~minikafka.broker.cluster.cluster.Cluster.cut_off_controller`): it is fenced once
  ``broker.session.timeout.ms`` passes without its heartbeats, its partitions get new leaders,
  and it hears of none of it until healed: a zombie leader, as a KRaft broker cut off from the
  quorum is.
- ``all``: the three at once, a broker alone on its side of a network partition.

With ``brokers`` or ``clients`` alone the controller still hears the broker: it stays active and
keeps leading its partitions while their ISR shrinks to it (the controller quorum on the broker's
side of the partition, in Kafka's terms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minikafka.broker.context import CloseConnection

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from minikafka.broker.context import RequestContext
    from minikafka.broker.dispatch import ApiSpec
    from minikafka.broker.interceptor import RequestInterceptor

#: the client id prefix of the cluster's own inter-broker requests (peer_client, fetcher)
PEER_CLIENT_PREFIX = "replica-fetcher-"
MODES = ("none", "clients", "brokers", "controller", "all")


class Isolation:
    """Which broker is cut off from what: node id -> ``clients``, ``brokers`` or ``all``."""

    def __init__(self) -> None:
        self._cut: dict[int, str] = {}

    def mode(self, node_id: int) -> str:
        return self._cut.get(node_id, "none")

    def isolate(self, node_id: int, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"isolate from {mode!r}: expected one of clients, brokers, controller, all")
        if mode == "none":
            self._cut.pop(node_id, None)
        else:
            self._cut[node_id] = mode

    def heal(self, node_id: int) -> None:
        self._cut.pop(node_id, None)

    def from_brokers(self, node_id: int) -> bool:
        return self.mode(node_id) in ("brokers", "all")

    def from_clients(self, node_id: int) -> bool:
        return self.mode(node_id) in ("clients", "all")

    def from_controller(self, node_id: int) -> bool:
        return self.mode(node_id) in ("controller", "all")


def peer_of(client_id: str | None) -> int | None:
    """The node id of the broker that sent a request with this client id, or None for a client."""
    if client_id is None or not client_id.startswith(PEER_CLIENT_PREFIX):
        return None
    try:
        return int(client_id[len(PEER_CLIENT_PREFIX):])
    except ValueError:
        return None


class IsolationInterceptor:
    """Broker ``node_id``'s interceptor: closes the connections :class:`Isolation` cuts, and hands
    the rest to ``inner`` (the cluster's fault rules) or to the handler."""

    def __init__(self, node_id: int, isolation: Isolation, inner: RequestInterceptor | None = None) -> None:
        self.node_id = node_id
        self.isolation = isolation
        self.inner = inner

    def refuses(self, client_id: str | None) -> bool:
        peer = peer_of(client_id)
        if peer is None:
            return self.isolation.from_clients(self.node_id)
        return self.isolation.from_brokers(self.node_id) or self.isolation.from_brokers(peer)

    async def dispatch(self, spec: ApiSpec, ctx: RequestContext, request: Any) -> ApiMessage | None:
        self._check(ctx.client_id)
        if self.inner is not None:
            result: ApiMessage | None = await self.inner.dispatch(spec, ctx, request)
        else:
            result = await spec.handler(ctx, request)
        self._check(ctx.client_id)  # cut while it waited (a long-poll Fetch): its answer is lost too
        return result

    def _check(self, client_id: str | None) -> None:
        if self.refuses(client_id):
            raise CloseConnection(f"broker {self.node_id} is isolated ({self.isolation.mode(self.node_id)})")
