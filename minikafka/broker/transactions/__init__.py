"""The transaction coordinator (transactional ids, epochs, commit/abort) and its log."""

from minikafka.broker.transactions.coordinator import TransactionCoordinator

__all__ = ["TransactionCoordinator"]
