"""The broker's state as JSON for the console: partitions with their producers, consumer groups.

Each function reads a running broker through :class:`~minikafka.testkit.control.BrokerControl`
and returns plain JSON-able data: it is the body of an admin endpoint route and a part of the
live snapshot, so the page renders exactly what ``GET`` answers.

minikafka runs as one broker here: it leads every partition, is its only replica and the whole
ISR, and its log end is the high watermark. The shape already has ``replicas``, ``isr`` and
``replica_offsets`` so a page drawing replicas needs no change when partitions have several.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from minikafka.broker.groups.consumer_records import STATE_NAMES
from minikafka.broker.topics import is_internal

if TYPE_CHECKING:
    from minikafka.broker.groups.consumer_group import ConsumerGroup
    from minikafka.broker.groups.consumer_records import Assignment
    from minikafka.broker.groups.group import Group
    from minikafka.broker.server import Broker
    from minikafka.storage.log import PartitionLog
    from minikafka.storage.producer_state import ProducerStateEntry
    from minikafka.testkit.control import BrokerControl

#: A single broker stamps every batch with leader epoch 0 (storage/log.py): the only epoch there is.
SINGLE_BROKER_EPOCH = 0
#: Producers listed per partition, most recently active first (a long test can leave thousands).
MAX_PRODUCERS = 50


def now_ms(control: BrokerControl) -> int:
    """The broker's clock (injectable in tests), which transaction start times are read against."""
    return int(control.broker.clock())


def partitions(control: BrokerControl, internal: bool = False) -> list[dict[str, Any]]:
    """Every partition (Kafka's internal topics only with ``internal``): offsets, segments, producers.
    Empty while the broker is stopped."""
    logs = control.broker.logs
    if logs is None or not control.running:
        return []
    node = control.broker.node_id
    out = [partition_view(plog, node) for plog in logs.all_logs() if internal or not is_internal(plog.topic)]
    return sorted(out, key=lambda p: (p["topic"], p["partition"]))


def partition_view(plog: PartitionLog, node: int) -> dict[str, Any]:
    """One partition as ``node``'s log holds it (a cluster's view overrides leader, epoch and replicas)."""
    producers = sorted(plog.producers().values(), key=lambda e: e.last_append_ms, reverse=True)
    return {
        "topic": plog.topic,
        "partition": plog.partition,
        "leader": node,
        "leader_epoch": SINGLE_BROKER_EPOCH,
        "replicas": [node],
        "isr": [node],
        "log_start_offset": plog.log_start_offset,
        "high_watermark": plog.high_watermark,
        "last_stable_offset": plog.last_stable_offset,
        "log_end_offset": plog.log_end_offset,
        "segments": len(plog.segment_base_offsets()),
        "size_bytes": plog.size_bytes,
        "replica_offsets": [{"broker": node, "log_start_offset": plog.log_start_offset,
                             "log_end_offset": plog.log_end_offset}],
        "producer_count": len(producers),
        "producers": [_producer(entry) for entry in producers[:MAX_PRODUCERS]],
    }


def _producer(entry: ProducerStateEntry) -> dict[str, Any]:
    """One producer id's state: the cached batches are the window a retried batch is matched against."""
    return {
        "producer_id": entry.producer_id,
        "epoch": entry.epoch,
        "batches": [{"first_sequence": b.first_seq, "last_sequence": b.last_seq, "first_offset": b.first_offset,
                     "last_offset": b.last_offset, "timestamp": b.timestamp} for b in entry.batches],
        "last_timestamp": entry.last_timestamp,
        "last_append_ms": entry.last_append_ms,
        "coordinator_epoch": entry.coordinator_epoch,
        "current_txn_first_offset": entry.current_txn_first_offset,
    }


def groups(control: BrokerControl) -> list[dict[str, Any]]:
    """Every consumer group of both protocols (``type``: ``classic`` or ``consumer``, KIP-848):
    live membership (if any), committed offsets and the lag behind the high watermark. A group
    that only commits offsets (no JoinGroup) is listed as well (as classic). Both types have
    ``state``, ``protocol_type``, ``protocol``, ``generation``, ``leader`` and ``members``
    (``member_id``, ``instance_id``, ``client_id``, ``client_host``, ``assignment``); a consumer
    group adds ``group_epoch``, ``assignment_epoch``, ``assignor`` and per member ``member_epoch``,
    ``member_state``, ``subscribed_topics``, ``subscribed_regex``, ``target_assignment`` and
    ``pending_revocation`` (``generation`` is its group epoch, ``protocol`` its assignor)."""
    return broker_groups(control.broker)


def broker_groups(broker: Broker) -> list[dict[str, Any]]:
    """:func:`groups` of the broker that coordinates them (broker 1 of a cluster)."""
    coordinator = broker.groups
    logs = broker.logs
    if coordinator is None or logs is None or not coordinator.active:
        return []
    ends = {(p.topic, p.partition): p.high_watermark for p in logs.all_logs()}
    # each group's committed offsets are in the store of its __consumer_offsets partition
    committed_by_group = {name: store.offsets(name) for store in coordinator.table.stores.values()
                          for name in store.groups_with_offsets()}
    consumer_groups = coordinator.table.consumer_groups
    names = {info.topic_id: topic for topic, info in logs.topics().items()}
    out = []
    for name in sorted(set(coordinator.groups) | set(consumer_groups) | set(committed_by_group)):
        group = coordinator.groups.get(name)
        consumer = consumer_groups.get(name)
        membership = _consumer_membership(consumer, names) if consumer is not None else _membership(group)
        committed = committed_by_group.get(name, {})
        offsets: list[dict[str, Any]] = []
        for (topic, partition), stored in sorted(committed.items()):
            end = ends.get((topic, partition))
            offsets.append({"topic": topic, "partition": partition, "committed": stored.offset,
                            "high_watermark": end, "lag": None if end is None else max(0, end - stored.offset)})
        out.append({"group_id": name, **membership, "offsets": offsets,
                    "lag": sum(o["lag"] or 0 for o in offsets)})
    return out


def _membership(group: Group | None) -> dict[str, Any]:
    if group is None:
        return {"type": "classic", "state": "Empty", "protocol_type": None, "protocol": None, "generation": 0, "leader": None,
                "members": []}
    return {
        "type": "classic",
        "state": group.state.value,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "generation": group.generation_id,
        "leader": group.leader_id,
        "members": [{"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                     "client_host": m.client_host, "assignment": _assignment(group.protocol_type, m.assignment)}
                    for m in sorted(group.members.values(), key=lambda m: m.member_id)],
    }


def _consumer_membership(group: ConsumerGroup, names: dict[Any, str]) -> dict[str, Any]:
    """A KIP-848 group: epochs, assignor, and each member's reconciliation."""
    assignor = group.preferred_assignor("uniform")

    def partitions(assignment: Assignment) -> list[dict[str, Any]]:
        return [{"topic": names.get(tid, str(tid)), "partitions": sorted(ps)}
                for tid, ps in sorted(assignment.items(), key=lambda kv: names.get(kv[0], str(kv[0]))) if ps]

    return {
        "type": "consumer", "state": group.state, "protocol_type": "consumer", "protocol": assignor,
        "generation": group.epoch, "leader": None, "group_epoch": group.epoch,
        "assignment_epoch": group.assignment_epoch, "assignor": assignor,
        "members": [{"member_id": m.member_id, "instance_id": m.instance_id,
                     "client_id": m.subscription.client_id, "client_host": m.subscription.client_host,
                     "member_epoch": m.epoch, "member_state": STATE_NAMES.get(m.current.state, "UNKNOWN"),
                     "subscribed_topics": list(m.subscription.topic_names),
                     "subscribed_regex": m.subscription.regex,
                     "assignment": partitions(m.current.assigned),
                     "pending_revocation": partitions(m.current.pending),
                     "target_assignment": partitions(group.targets.get(m.member_id, {}))}
                    for m in sorted(group.members.values(), key=lambda m: m.member_id)],
    }


def _assignment(protocol_type: str | None, data: bytes) -> list[dict[str, Any]] | None:
    """A consumer-protocol assignment (version, [topic, [partition]], user data) as topics and
    partitions; None for another protocol type or bytes that do not parse (the page shows the size)."""
    if protocol_type != "consumer" or not data:
        return None if data else []
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out = []
        for _ in range(max(0, count)):
            (size,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2:pos + 2 + size].decode()
            pos += 2 + size
            (n,) = struct.unpack_from(">i", data, pos)
            numbers = list(struct.unpack_from(f">{max(0, n)}i", data, pos + 4))
            pos += 4 + 4 * max(0, n)
            out.append({"topic": topic, "partitions": numbers})
        return out
    except (struct.error, UnicodeDecodeError):
        return None


def snapshot(control: BrokerControl) -> dict[str, Any]:
    """What the page shows, in one piece: the bodies of ``GET /status``, ``/partitions``,
    ``/transactions``, ``/groups`` and ``/faults``, and the broker's clock."""
    return {
        "now_ms": now_ms(control),
        "status": control.status(),
        "partitions": partitions(control),
        "transactions": control.transactions(),
        "groups": groups(control),
        "faults": [rule.to_dict() for rule in control.faults.rules],
    }
