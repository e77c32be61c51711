"""What a handler knows about the request it is answering, and the services it answers with."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from minikafka.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from minikafka.broker.cluster.cluster import ClusterLink
    from minikafka.broker.cluster.replica_manager import ReplicaManager
    from minikafka.broker.connection import Connection
    from minikafka.broker.dispatch import ApiSpec
    from minikafka.broker.fetch_waiters import FetchWaiters
    from minikafka.broker.flusher import Flusher
    from minikafka.broker.group_configs import GroupConfigs
    from minikafka.broker.groups import GroupCoordinator
    from minikafka.broker.metrics import Metrics
    from minikafka.broker.transactions import TransactionCoordinator
    from minikafka.broker.transactions.markers import LocalMarkers
    from minikafka.config import BrokerConfig
    from minikafka.storage.facade import Storage
    from minikafka.storage.producer_ids import ProducerIdAllocator


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of answering."""


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """Everything handlers work with, built once by ``Broker.start()``: every request of that run
    shares this one object, so none of it is optional and a handler never needs the broker."""

    config: BrokerConfig
    node_id: int
    storage: Storage
    groups: GroupCoordinator
    #: each group's dynamic configs (DescribeConfigs and the alter APIs on GROUP resources)
    group_configs: GroupConfigs
    transactions: TransactionCoordinator
    #: writes the transaction markers a coordinator sends (WriteTxnMarkers) into this broker's logs
    markers: LocalMarkers
    producer_ids: ProducerIdAllocator
    #: the broker clock (ms); tests move it, so it is read through the broker on every call
    clock: Callable[[], int]
    metrics: Metrics
    flusher: Flusher
    fetch_waiters: FetchWaiters
    #: the APIs this broker serves, as ApiVersions advertises them
    api_table: Mapping[int, ApiSpec]
    #: False once the broker is stopping: a long-polling Fetch answers with what it has
    running: Callable[[], bool]
    #: host and port of the first listener, for a connection that came in on none
    advertised_address: tuple[str, int]
    #: a cluster broker's replicas (leaders, followers, high watermarks); None on a single broker
    replicas: ReplicaManager | None = None
    #: a cluster broker's controller and peers; None on a single broker
    cluster: ClusterLink | None = None


    def transaction_coordinator_of(self, transactional_id: str | None) -> TransactionCoordinator | None:
        """The transaction coordinator that holds ``transactional_id``: this broker's, or in a
        cluster the one of the broker leading the id's partition of ``__transaction_state`` (asked in
        the process, where Kafka's brokers ask it with AddPartitionsToTxn verify_only); None while
        that broker is down."""
        if self.cluster is None:
            return self.transactions
        from minikafka.broker.transactions.records import TRANSACTION_STATE_TOPIC

        broker = self.cluster.coordinating_broker(TRANSACTION_STATE_TOPIC, transactional_id or "")
        return None if broker is None else broker.transactions


@dataclass(slots=True)
class RequestContext:
    """Built for every request (keep it cheap): the run's services, the connection, the header."""

    services: BrokerServices
    connection: Connection
    header: RequestHeader

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Host and port of the listener this request came in on, as Metadata, DescribeCluster and
        FindCoordinator advertise them."""
        listener = self.connection.listener
        if listener is None:
            return self.services.advertised_address
        return listener.endpoint_host, listener.endpoint_port
