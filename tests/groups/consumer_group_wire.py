"""ConsumerGroupHeartbeat / ConsumerGroupDescribe requests for the raw-protocol tests of KIP-848 groups."""

from __future__ import annotations

import uuid
from typing import Any

from minikafka.protocol.consumer_group_apis import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tests.kafka_wire import RawClient

UNSET: Any = object()


def heartbeat_request(group: str, member: str, epoch: int, *, version: int = 1, instance: str | None = None,
                      rack: str | None = None, rebalance: int = -1, names: list[str] | None = None,
                      regex: str | None = None, assignor: str | None = None,
                      owned: dict[uuid.UUID, list[int]] | None = None) -> Any:
    Request = ConsumerGroupHeartbeatRequest[version]
    fields: dict[str, Any] = dict(
        group_id=group, member_id=member, member_epoch=epoch, instance_id=instance, rack_id=rack,
        rebalance_timeout_ms=rebalance, subscribed_topic_names=names, server_assignor=assignor,
        topic_partitions=None if owned is None else [
            Request.TopicPartitions(topic_id=tid, partitions=ps) for tid, ps in owned.items()])
    if version >= 1:
        fields["subscribed_topic_regex"] = regex
    return Request(**fields)


def join(client: RawClient, group: str, member: str, names: list[str] | None = None, *, version: int = 1,
         regex: str | None = "", **fields: Any) -> Any:
    """A full epoch-0 heartbeat (a join), as librdkafka sends it."""
    return client.request(heartbeat_request(group, member, 0, version=version, rebalance=300000,
                                            names=names if names is not None else [], owned={},
                                            regex=regex if version >= 1 else None, **fields))


def beat(client: RawClient, group: str, member: str, epoch: int, **fields: Any) -> Any:
    """A plain heartbeat (every optional field null unless given)."""
    return client.request(heartbeat_request(group, member, epoch, **fields))


def assigned(response: Any) -> dict[uuid.UUID, list[int]] | None:
    """The response's assignment, None when it carries none."""
    if response.assignment is None:
        return None
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


def describe(client: RawClient, *groups: str, version: int = 1) -> Any:
    Request = ConsumerGroupDescribeRequest[version]
    return client.request(Request(group_ids=list(groups), include_authorized_operations=False)).groups
