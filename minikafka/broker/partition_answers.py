"""The per-topic, per-partition answers that many Kafka APIs share.

Requests such as DeleteRecords, ListOffsets, DescribeProducers or OffsetCommit name partitions
as an array of topics, each with an array of partitions, and their responses answer in the same
shape and order. The handlers say what one partition's answer is; the nesting is built here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from minikafka.errors import ErrorCode
from minikafka.storage.disk_format import TopicPartition

if TYPE_CHECKING:
    from minikafka.broker.cluster.controller import TopicRecord
    from minikafka.broker.context import BrokerServices
    from minikafka.storage.log_manager import TopicInfo



def per_partition(topic_cls: Any, request_topics: Iterable[Any], answer: Callable[[str, Any], Any],
                  partitions_field: str = "partitions") -> list[Any]:
    """One ``topic_cls`` entry per requested topic, in request order, holding ``answer(topic name,
    partition)`` for each requested partition (an entry of the topic's ``partitions_field`` array)."""
    return [
        topic_cls(name=topic.name, partitions=[answer(topic.name, p) for p in getattr(topic, partitions_field)])
        for topic in request_topics
    ]


def error_answers(topic_cls: Any, partition_cls: Any, request_topics: Iterable[Any],
                  errors: Mapping[TopicPartition, int]) -> list[Any]:
    """Per requested partition, its error code from ``errors`` (responses that carry nothing else)."""
    return per_partition(topic_cls, request_topics, lambda topic, p: partition_cls(
        partition_index=p.partition_index, error_code=errors[(topic, p.partition_index)]))


def cluster_topics(services: BrokerServices) -> Mapping[str, TopicInfo | TopicRecord]:
    """Every topic of the cluster with its partition count: the controller's topics on a cluster
    broker, whose own logs hold only the partitions it has replicas of; the logs' on a single broker.
    Requests that name partitions anywhere in the cluster (OffsetCommit to a group coordinator)
    are checked against these, as Kafka checks them against its metadata cache."""
    return services.storage.topics() if services.cluster is None else services.cluster.controller.topics


def known_partitions(topics: Mapping[str, TopicInfo | TopicRecord], request_topics: Iterable[Any]
                     ) -> tuple[dict[TopicPartition, int], list[tuple[TopicPartition, Any]]]:
    """(UNKNOWN_TOPIC_OR_PARTITION for each requested partition that does not exist, the others
    with their request entries, in request order)."""
    errors: dict[TopicPartition, int] = {}
    known: list[tuple[TopicPartition, Any]] = []
    for topic in request_topics:
        info = topics.get(topic.name) if topic.name is not None else None
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if info is None or not 0 <= p.partition_index < info.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append((tp, p))
    return errors, known
