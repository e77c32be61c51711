"""Raw-protocol helpers for transaction tests: the transaction APIs as a client sends them, and
what the logs hold afterwards (control batches, ``__transaction_state`` records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.broker.transactions.records import TxnRecord, parse_txn_key, parse_txn_value
from minikafka.storage.batch import split_batches
from tests.fuzz_requests import describe_producers
from tests.kafka_wire import RawClient
from tests.scenario_helpers import fetch_raw, log_start_offset, produce

TXN_LOG = "__transaction_state"
OFFSETS = "__consumer_offsets"
COMMIT, ABORT = 1, 0


def init_pid(client: RawClient, txn_id: str | None, timeout_ms: int = 60000, version: int = 4,
             producer_id: int = -1, producer_epoch: int = -1) -> Any:
    fields: dict[str, Any] = {"transactional_id": txn_id, "transaction_timeout_ms": timeout_ms}
    if version >= 3:
        fields.update(producer_id=producer_id, producer_epoch=producer_epoch)
    return client.request(InitProducerIdRequest[version](**fields))


def add_partitions(client: RawClient, txn_id: str | None, pid: int, epoch: int,
                   partitions: dict[str, list[int]], version: int = 3) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn; the error code per partition."""
    Request = AddPartitionsToTxnRequest[version]
    Topic = Request.AddPartitionsToTxnTopic
    response = client.request(Request(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[Topic(name=t, partitions=ps) for t, ps in partitions.items()]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_offsets(client: RawClient, txn_id: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
    return int(client.request(AddOffsetsToTxnRequest[version](
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group)).error_code)


def end_txn(client: RawClient, txn_id: str | None, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(client.request(EndTxnRequest[version](
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)).error_code)


def txn_offset_commit(client: RawClient, txn_id: str, group: str, pid: int, epoch: int,
                      offsets: dict[tuple[str, int], int], version: int = 3, generation: int = -1,
                      member: str = "") -> dict[tuple[str, int], int]:
    Request = TxnOffsetCommitRequest[version]
    Topic = Request.TxnOffsetCommitRequestTopic
    Part = Topic.TxnOffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        fields: dict[str, Any] = {"partition_index": partition, "committed_offset": offset,
                                  "committed_metadata": ""}
        if version >= 2:
            fields["committed_leader_epoch"] = -1
        by_topic.setdefault(topic, []).append(Part(**fields))
    fields = {"transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
              "topics": [Topic(name=t, partitions=ps) for t, ps in by_topic.items()]}
    if version >= 3:
        fields.update(generation_id=generation, member_id=member, group_instance_id=None)
    response = client.request(Request(**fields))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def offset_fetch(client: RawClient, group: str, tp: tuple[str, int], require_stable: bool = False
                 ) -> tuple[int, int]:
    """(committed offset, partition error) via OffsetFetch v7."""
    Request = OffsetFetchRequest[7]
    Topic = Request.OffsetFetchRequestTopic
    response = client.request(Request(group_id=group, topics=[Topic(name=tp[0], partition_indexes=[tp[1]])],
                                      require_stable=require_stable))
    part = response.topics[0].partitions[0]
    return part.committed_offset, part.error_code


def describe(client: RawClient, *txn_ids: str) -> list[Any]:
    return list(client.request(DescribeTransactionsRequest[0](transactional_ids=list(txn_ids))).transaction_states)


def list_txns(client: RawClient, states: list[str] | None = None, pids: list[int] | None = None,
              duration: int = -1, version: int = 1) -> Any:
    fields: dict[str, Any] = {"state_filters": states or [], "producer_id_filters": pids or []}
    if version >= 1:
        fields["duration_filter"] = duration
    return client.request(ListTransactionsRequest[version](**fields))


def transactional_batch(pid: int, epoch: int, seq: int, count: int = 1, value: bytes = b"v") -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(count):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=value, headers=[])
    return bytearray(builder.build())


def start_with_data(client: RawClient, txn_id: str, partitions: list[int], timeout_ms: int = 60000
                    ) -> tuple[int, int]:
    """A transaction of a new producer holding two records in each of ``partitions`` of topic ``t``:
    its (producer id, epoch)."""
    init = init_pid(client, txn_id, timeout_ms)
    pid, epoch = init.producer_id, init.producer_epoch
    assert add_partitions(client, txn_id, pid, epoch, {"t": partitions}) == {("t", p): 0 for p in partitions}
    for p in partitions:
        assert produce(client, "t", transactional_batch(pid, epoch, 0, 2), partition=p,
                       transactional_id=txn_id).error_code == 0
    return pid, epoch


def open_transactions(client: RawClient, topic: str, partitions: int) -> list[tuple[int, int, int]]:
    """(partition, producer id, first offset) of every transaction still open on ``topic``."""
    response = client.request(describe_producers(0, topic, partitions))
    return [(p.partition_index, s.producer_id, s.current_txn_start_offset)
            for t in response.topics for p in t.partitions for s in p.active_producers
            if s.current_txn_start_offset >= 0]


@dataclass
class StoredBatch:
    offset: int
    attributes: int
    producer_id: int
    producer_epoch: int
    is_control: bool
    control_type: int | None  # COMMIT 1 / ABORT 0 for a marker
    coordinator_epoch: int | None
    records: list[tuple[bytes | None, bytes | None]]


def stored_batches(client: RawClient, topic: str, partition: int = 0) -> list[StoredBatch]:
    """Every batch of the partition from the log start, read with read_uncommitted fetches."""
    out: list[StoredBatch] = []
    offset = 0
    for _ in range(10_000):
        part = fetch_raw(client, topic, offset=offset, partition=partition)
        if part.error_code == 1:
            offset = log_start_offset(client, topic, partition)
            continue
        assert part.error_code == 0, part
        data = bytes(part.records or b"")
        batches = split_batches(data)
        for pos, header in batches:
            records = list(DefaultRecordBatch(data[pos:pos + header.size]))
            kind = coord = None
            if header.is_control:
                key, value = bytes(records[0].key), bytes(records[0].value)
                kind = int.from_bytes(key[2:4], "big")
                coord = int.from_bytes(value[2:6], "big")
            out.append(StoredBatch(header.base_offset, header.attributes, header.producer_id,
                                   header.producer_epoch, header.is_control, kind, coord,
                                   [(None if r.key is None else bytes(r.key),
                                     None if r.value is None else bytes(r.value)) for r in records]))
        if not batches or batches[-1][1].next_offset >= part.high_watermark:
            return out
        offset = batches[-1][1].next_offset
    raise AssertionError("log did not end within 10,000 fetches")


def markers(client: RawClient, topic: str, partition: int = 0) -> list[tuple[int, int, int, int]]:
    """(offset, producer id, producer epoch, COMMIT 1/ABORT 0) of every control batch, asserting
    Kafka's marker layout (attributes 0x30, coordinator epoch 0)."""
    found = []
    for b in stored_batches(client, topic, partition):
        if b.is_control:
            assert b.attributes & 0x30 == 0x30, hex(b.attributes)
            assert b.coordinator_epoch == 0
            assert b.control_type is not None
            found.append((b.offset, b.producer_id, b.producer_epoch, b.control_type))
    return found


def txn_records(client: RawClient, txn_id: str) -> list[TxnRecord | None]:
    """Every ``__transaction_state`` record of ``txn_id`` in log order (None for a tombstone)."""
    out: list[TxnRecord | None] = []
    for b in stored_batches(client, TXN_LOG):
        for key, value in b.records:
            if key is not None and parse_txn_key(key) == txn_id:
                out.append(None if value is None else parse_txn_value(value))
    return out


def commit_offsets(client: RawClient, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A normal OffsetCommit (v2, no group management)."""
    from kafka.protocol.consumer import OffsetCommitRequest

    Request = OffsetCommitRequest[2]
    Topic = Request.OffsetCommitRequestTopic
    Part = Topic.OffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(Part(partition_index=partition, committed_offset=offset,
                                                   committed_metadata=""))
    response = client.request(Request(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                      retention_time_ms=-1,
                                      topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]))
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions), response


def wait_for(broker: Any, condition: Any, what: str) -> None:
    """Poll ``condition`` on the broker's loop (markers are written by a task of the coordinator)."""
    import asyncio

    for _ in range(1000):
        if broker.call(condition):
            return
        broker.call(asyncio.sleep, 0.01)
    raise AssertionError(f"timed out waiting for {what}")


def wait_state(broker: Any, txn_id: str, state: Any) -> None:
    """Wait until the coordinator has ``txn_id`` in ``state`` (a TxnState)."""
    txns = broker.broker.transactions.txns
    wait_for(broker, lambda: txn_id in txns and txns[txn_id].state is state, f"{txn_id} to reach {state.display}")
