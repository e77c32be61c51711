"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from minikafka.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from minikafka.broker.connection import Connection
    from minikafka.broker.groups import GroupCoordinator
    from minikafka.broker.server import Broker
    from minikafka.broker.transactions import TransactionCoordinator
    from minikafka.storage.facade import Storage
    from minikafka.storage.producer_ids import ProducerIdAllocator


T = TypeVar("T")


def _built(service: T | None) -> T:
    assert service is not None, "the broker is not started"
    return service


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

    # The services below are built by Broker.start(); requests are only served after it.

    @property
    def storage(self) -> Storage:
        return _built(self.broker.logs)

    @property
    def groups(self) -> GroupCoordinator:
        return _built(self.broker.groups)

    @property
    def transactions(self) -> TransactionCoordinator:
        return _built(self.broker.transactions)

    @property
    def producer_ids(self) -> ProducerIdAllocator:
        return _built(self.broker.producer_ids)

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Host and port of the listener this request came in on, as Metadata, DescribeCluster and
        FindCoordinator advertise them."""
        return self.broker.advertised_address(self.connection.listener)
