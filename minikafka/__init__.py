"""minikafka: a Kafka wire-protocol compatible mini-broker with exact idempotent-producer semantics."""

__version__ = "0.1.0"
