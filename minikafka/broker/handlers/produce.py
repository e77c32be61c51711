"""Produce (key 0): request-level checks, then one append per partition (reference §1.6, §2.2).

The record bytes are handled by their batch header only. Request-level rules (one complete
v2 batch per partition, zstd needs v7+, acks, internal topics, transactional batches) are
checked here in Kafka's order; the log-level ones and the producer-state rules are the
partition log's (:meth:`PartitionLog.append_from_client`).
"""

from __future__ import annotations

import logging
import struct
from typing import Any

from kafka.protocol.producer import ProduceResponse

from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.broker.topics import is_internal
from minikafka.errors import ErrorCode, KafkaError
from minikafka.protocol.fast import make
from minikafka.storage import legacy
from minikafka.storage.batch import (
    ATTRIBUTES_OFFSET,
    CODEC_ZSTD,
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    TRANSACTIONAL_FLAG,
)

log = logging.getLogger("minikafka.produce")

_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_PID_EPOCH = struct.Struct(">qh")
#: producerId follows maxTimestamp in the batch header; producerEpoch follows it.
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + 8
#: Errors for which Kafka reports log_start_offset -1 (reference §2.2 table).
_NO_LOG_START = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
)
#: Legacy message-set minimum: Kafka calls a smaller length field corrupt.
_MIN_LENGTH_FIELD = 14


def _next_batch(records: bytes, pos: int) -> int | None:
    """End position of the complete batch at ``pos``; None when no complete batch is there."""
    remaining = len(records) - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _LENGTH.unpack_from(records, pos + 8)
    if length < _MIN_LENGTH_FIELD:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch length {length} is too small")
    if remaining < LOG_OVERHEAD + length:
        return None
    magic = struct.unpack_from(">b", records, pos + MAGIC_OFFSET)[0]
    if magic < 0 or magic > 2:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic {magic}")
    return pos + LOG_OVERHEAD + length


def single_batch(records: bytes | memoryview | None, version: int) -> bytearray | memoryview:
    """The one v2 batch a Produce v3+ partition must carry (ProduceRequest.validateRecords)."""
    if not records:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a partition must carry one record batch")
    end = _next_batch(records, 0)
    if end is None:
        raise KafkaError(ErrorCode.INVALID_RECORD, "no complete record batch in the partition data")
    if records[MAGIC_OFFSET] != 2:
        raise KafkaError(ErrorCode.INVALID_RECORD, "only record batches with magic version 2 are allowed")
    (attributes,) = _ATTRIBUTES.unpack_from(records, ATTRIBUTES_OFFSET)
    if version < 7 and (attributes & COMPRESSION_MASK) == CODEC_ZSTD:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
    if _next_batch(records, end) is not None:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a partition must carry exactly one record batch")
    if isinstance(records, memoryview) and not records.readonly:
        return records[:end]  # the request's own buffer (a large frame): appended in place
    return bytearray(memoryview(records)[:end])


class _NothingToAppend(Exception):
    """A v0-v2 message set without one complete message: Kafka appends nothing and answers NONE."""


def _legacy_batch(records: bytes | None, partition_log: Any, now_ms: int) -> bytearray:
    """Produce v0-v2: a message set of format v0/v1 converted to one v2 batch; a v2 batch as is
    (Kafka takes v2 batches in these versions too)."""
    if records and len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] == 2:
        return single_batch(records, 2)
    batch = legacy.message_set_to_batch(records or b"", legacy.TopicRules.from_config(partition_log.config), now_ms)
    if batch is None:
        raise _NothingToAppend
    return batch


def _is_transactional(records: bytes | None) -> bool:
    if not records or len(records) < ATTRIBUTES_OFFSET + 2 or records[MAGIC_OFFSET] != 2:
        return False  # v0/v1 messages have no transactional bit
    (attributes,) = _ATTRIBUTES.unpack_from(records, ATTRIBUTES_OFFSET)
    return bool(attributes & TRANSACTIONAL_FLAG)


def _transactional_producer(records: bytes | None) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional batch, else None."""
    if records is None or not _is_transactional(records) or len(records) < PRODUCER_ID_OFFSET + _PID_EPOCH.size:
        return None
    producer_id, epoch = _PID_EPOCH.unpack_from(records, PRODUCER_ID_OFFSET)
    return producer_id, epoch


def _verify_transactional(ctx: RequestContext, transactional_id: str | None, batch: bytearray,
                          tp: tuple[str, int], version: int) -> None:
    """A transactional batch is appended only while its producer's transaction is Ongoing at the
    coordinator with ``tp`` in it (checked in-process, so a late retry after an abort cannot open
    a transaction nobody will close). The coordinator's answer as Produce reports it
    (``docs/semantics.md#txn-produce``)."""
    coordinator = ctx.broker.transactions
    if coordinator is None or not _is_transactional(batch):
        return
    producer_id, epoch = _PID_EPOCH.unpack_from(batch, PRODUCER_ID_OFFSET)
    verdict = coordinator.check_transactional_write(transactional_id, producer_id, epoch, tp)
    if verdict == ErrorCode.NONE:
        return
    if verdict == ErrorCode.TRANSACTION_ABORTABLE:
        code = ErrorCode.TRANSACTION_ABORTABLE if version >= 11 else ErrorCode.INVALID_TXN_STATE
        raise KafkaError(code, f"{tp[0]}-{tp[1]} is not part of an ongoing transaction of producer {producer_id}")
    if verdict == ErrorCode.PRODUCER_FENCED:
        raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, f"producer {producer_id} epoch {epoch} is fenced")
    if verdict == ErrorCode.INVALID_PRODUCER_ID_MAPPING:
        raise KafkaError(verdict, f"producer {producer_id} is not the transactional id's producer")
    raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "the transaction is being completed; retry")


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    logs = broker.logs
    assert logs is not None
    version = ctx.api_version
    acks = request.acks
    Response = ProduceResponse[version]
    TopicResponse = Response.TopicProduceResponse
    PartitionResponse = TopicResponse.PartitionProduceResponse

    txn_without_id = request.transactional_id is None and any(
        _is_transactional(p.records) for t in request.topic_data for p in t.partition_data
    )
    # Kafka refuses the whole request when its transactional batches come from more than one
    # producer id and epoch (ReplicaManager.handleProduceAppend)
    txn_producers = {_transactional_producer(p.records) for t in request.topic_data for p in t.partition_data}
    mixed_producers = len(txn_producers - {None}) > 1
    min_isr = broker.config.get("min.insync.replicas")
    appended: list[Any] = []
    failed = False
    topics_out = []
    for topic in request.topic_data:
        parts_out = []
        for part in topic.partition_data:
            error = ErrorCode.NONE
            message: str | None = None
            record_errors: list[tuple[int, str | None]] = []
            base_offset = -1
            append_time = -1
            log_start = -1
            partition_log = logs.get_log(topic.name, part.index) if topic.name else None
            try:
                if txn_without_id:
                    raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                     "transactional batches need a transactional id")
                if mixed_producers:
                    raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                                     "transactional batches of more than one producer in one request")
                if partition_log is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if version >= 3:
                    batch = single_batch(part.records, version)
                else:  # message format v0/v1 (minikafka.storage.legacy)
                    batch = _legacy_batch(part.records, partition_log, broker.clock())
                if acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not -1, 0 or 1")
                if is_internal(topic.name) and ctx.client_id != "__admin_client":
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {topic.name}")
                if acks == -1 and min_isr > 1:
                    raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                     f"the in-sync replica set (1) is smaller than min.insync.replicas ({min_isr})")
                _verify_transactional(ctx, request.transactional_id, batch, (topic.name, part.index), version)
                result = partition_log.append_from_client(batch)
                base_offset = result.base_offset
                append_time = result.log_append_time
                log_start = result.log_start_offset
                if result.duplicate:
                    log.info("%s-%d: retried batch answered from the duplicate cache with offset %d (client %r)",
                             topic.name, part.index, result.base_offset, ctx.client_id)
                else:
                    appended.append(partition_log)
                    broker.metrics.batches_appended += 1
                    broker.metrics.records_appended += result.last_offset - result.base_offset + 1
            except _NothingToAppend:
                log_start = partition_log.log_start_offset if partition_log is not None else -1
            except KafkaError as exc:
                failed = True
                error = exc.code
                message = exc.message if version >= 8 else None
                record_errors = exc.record_errors
                if partition_log is not None and error not in _NO_LOG_START:
                    log_start = partition_log.log_start_offset
                log.debug("produce to %s-%d from %r failed: %s", topic.name, part.index, ctx.client_id, exc)
            if version >= 8:
                parts_out.append(make(
                    PartitionResponse, index=part.index, error_code=error, base_offset=base_offset,
                    log_append_time_ms=append_time, log_start_offset=log_start, error_message=message,
                    record_errors=[make(PartitionResponse.BatchIndexAndErrorMessage, batch_index=i,
                                        batch_index_error_message=m) for i, m in record_errors]))
            else:
                parts_out.append(make(PartitionResponse, index=part.index, error_code=error, base_offset=base_offset,
                                      log_append_time_ms=append_time, log_start_offset=log_start))
        topics_out.append(make(TopicResponse, name=topic.name, partition_responses=parts_out))

    if broker.config.fsync and acks != 0:
        for partition_log in appended:
            await broker.flusher.flush(partition_log)
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed on some partition")
        return None
    return make(Response, responses=topics_out, throttle_time_ms=0)
