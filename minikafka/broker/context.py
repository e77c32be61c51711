"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from minikafka.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from minikafka.broker.connection import Connection
    from minikafka.broker.groups import GroupCoordinator
    from minikafka.broker.server import Broker
    from minikafka.broker.transactions import TransactionCoordinator
    from minikafka.storage.facade import Storage
    from minikafka.storage.producer_ids import ProducerIdAllocator


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection instead of answering."""


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    connection: Connection
    header: RequestHeader

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def storage(self) -> Storage:
        """The broker's storage (open: requests are served only after ``Broker.start()``)."""
        logs = self.broker.logs
        assert logs is not None
        return logs

    @property
    def groups(self) -> GroupCoordinator:
        groups = self.broker.groups
        assert groups is not None
        return groups

    @property
    def transactions(self) -> TransactionCoordinator:
        coordinator = self.broker.transactions
        assert coordinator is not None
        return coordinator

    @property
    def producer_ids(self) -> ProducerIdAllocator:
        allocator = self.broker.producer_ids
        assert allocator is not None
        return allocator

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Host and port of the listener this request came in on, as Metadata, DescribeCluster and
        FindCoordinator advertise them."""
        return self.broker.advertised_address(self.connection.listener)
