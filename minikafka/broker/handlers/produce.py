"""Produce (key 0): request-level checks, then one append per partition (docs/semantics.md#append-rules, docs/semantics.md#produce-responses).

The record bytes are handled by their batch header only. Request-level rules (one complete
v2 batch per partition, zstd needs v7+, acks, internal topics, transactional batches) are
checked here in Kafka's order; the log-level ones and the producer-state rules are the
partition log's (:meth:`PartitionLog.append_from_client`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from minikafka.broker.cluster import answers
from minikafka.broker.context import CloseConnection, RequestContext
from minikafka.broker.topics import is_internal
from minikafka.errors import ErrorCode, KafkaError
from minikafka.protocol.fast import produce_partition_response, produce_response
from minikafka.storage import legacy
from minikafka.storage.batch import (
    is_transactional_batch,
    is_v2_batch,
    producer_of,
    single_batch,
    transactional_producer,
)
from minikafka.storage.disk_format import TopicPartition

log = logging.getLogger(__name__)

#: Errors for which Kafka reports log_start_offset -1 (docs/semantics.md#produce-responses).
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


class _NothingToAppend(Exception):
    """A v0-v2 message set without one complete message: Kafka appends nothing and answers NONE."""


def _legacy_batch(records: bytes | None, partition_log: Any, now_ms: int) -> bytearray | memoryview:
    """Produce v0-v2: a message set of format v0/v1 converted to one v2 batch; a v2 batch as is
    (Kafka takes v2 batches in these versions too)."""
    if is_v2_batch(records):
        return single_batch(records, 2)[0]
    batch = legacy.message_set_to_batch(records or b"", legacy.TopicRules.from_config(partition_log.config), now_ms)
    if batch is None:
        raise _NothingToAppend
    return batch


def _verify_transactional(ctx: RequestContext, transactional_id: str | None, batch: bytearray | memoryview,
                          tp: TopicPartition, version: int) -> None:
    """A transactional batch is appended only while its producer's transaction is Ongoing at the
    coordinator with ``tp`` in it (checked in-process, so a late retry after an abort cannot open
    a transaction nobody will close). The coordinator's answer as Produce reports it
    (``docs/semantics.md#txn-produce``)."""
    if not is_transactional_batch(batch):
        return
    coordinator = ctx.services.transaction_coordinator_of(transactional_id)
    if coordinator is None:  # a cluster whose coordinating broker is down
        raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "the transaction coordinator is not available; retry")
    producer_id, epoch = producer_of(batch)
    verdict = coordinator.check_transactional_write(transactional_id, producer_id, epoch, tp)
    if verdict == ErrorCode.NONE:
        return
    if verdict == ErrorCode.TRANSACTION_ABORTABLE:
        code = ErrorCode.TRANSACTION_ABORTABLE if version >= 11 else ErrorCode.INVALID_TXN_STATE
        raise KafkaError(code, f"{tp[0]}-{tp[1]} is not part of an ongoing transaction of producer {producer_id}")
    if verdict == ErrorCode.PRODUCER_FENCED:
        raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH, f"producer {producer_id} epoch {epoch} is fenced")
    if verdict == ErrorCode.INVALID_PRODUCER_ID_MAPPING:
        raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                         f"producer {producer_id} is not the transactional id's producer")
    raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "the transaction is being completed; retry")


def _transactional_batches(topic_data: list[Any]) -> tuple[bool, set[tuple[int, int]]]:
    """Whether any partition's data starts with a transactional batch, and the ``(producer id,
    epoch)`` pairs of those batches (one scan of the request for both request-level checks)."""
    any_transactional = False
    producers: set[tuple[int, int]] = set()
    for topic in topic_data:
        for part in topic.partition_data:
            if is_transactional_batch(part.records):
                any_transactional = True
                producer = transactional_producer(part.records)
                if producer is not None:
                    producers.add(producer)
    return any_transactional, producers


async def handle(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    services = ctx.services
    logs = services.storage
    version = ctx.api_version
    acks = request.acks
    transactional_id = request.transactional_id

    any_transactional, txn_producers = _transactional_batches(request.topic_data)
    txn_without_id = transactional_id is None and any_transactional
    # Kafka refuses the whole request when its transactional batches come from more than one
    # producer id and epoch (ReplicaManager.handleProduceAppend)
    mixed_producers = len(txn_producers) > 1
    metrics = services.metrics
    replicas = services.replicas
    appended: list[Any] = []
    #: acks=all writes of a cluster: (topic index, partition index, partition, offset the high watermark must reach)
    awaiting: list[tuple[int, int, Any, int]] = []
    failed = False
    topics_out: list[tuple[str, list[Any]]] = []
    for topic in request.topic_data:
        name = topic.name
        parts_out: list[Any] = []
        for part in topic.partition_data:
            error = ErrorCode.NONE
            message: str | None = None
            record_errors: list[tuple[int, str | None]] = []
            base_offset = -1
            append_time = -1
            log_start = -1
            partition_log = logs.get_log(name, part.index) if name else None
            try:
                if txn_without_id:
                    raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                     "transactional batches need a transactional id")
                if mixed_producers:
                    raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                                     "transactional batches of more than one producer in one request")
                if replicas is not None:  # a cluster: only the leader appends
                    not_leader = replicas.leader_error(name, part.index)
                    if not_leader != ErrorCode.NONE:
                        partition_log = None
                        raise KafkaError(not_leader)
                if partition_log is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if version >= 3:
                    batch, header = single_batch(part.records, version)
                else:  # message format v0/v1 (minikafka.storage.legacy)
                    batch, header = _legacy_batch(part.records, partition_log, services.clock()), None
                if acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not -1, 0 or 1")
                if is_internal(name) and ctx.client_id != "__admin_client":
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {name}")
                if acks == -1 and replicas is not None:
                    if replicas.below_min_isr(name, part.index):
                        raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "the in-sync replica set is smaller than "
                                         f"min.insync.replicas ({partition_log.config.get('min.insync.replicas')})")
                elif acks == -1:
                    # the topic's setting, else the broker's (a topic's config holds both)
                    min_isr = int(partition_log.config.get("min.insync.replicas", 1))
                    if min_isr > 1:
                        raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "the in-sync replica set (1) is "
                                         f"smaller than min.insync.replicas ({min_isr})")
                if any_transactional:
                    _verify_transactional(ctx, transactional_id, batch, (name, part.index), version)
                result = partition_log.append_from_client(batch, header=header)
                base_offset = result.base_offset
                append_time = result.log_append_time
                log_start = result.log_start_offset
                if result.duplicate:
                    log.info("%s-%d: retried batch answered from the duplicate cache with offset %d (client %r)",
                             name, part.index, result.base_offset, ctx.client_id)
                else:
                    appended.append(partition_log)
                    metrics.batches_appended += 1
                    metrics.records_appended += result.last_offset - result.base_offset + 1
                if replicas is not None and acks == -1:
                    awaiting.append((len(topics_out), len(parts_out), part.index, result.last_offset + 1))
            except _NothingToAppend:
                log_start = partition_log.log_start_offset if partition_log is not None else -1
            except KafkaError as exc:
                failed = True
                error = exc.code
                message = exc.message if version >= 8 else None
                record_errors = exc.record_errors
                if partition_log is not None and error not in _NO_LOG_START:
                    log_start = partition_log.log_start_offset
                log.debug("produce to %s-%d from %r failed: %s", name, part.index, ctx.client_id, exc)
            parts_out.append(produce_partition_response(version, part.index, error, base_offset, append_time,
                                                        log_start, message, record_errors))
        topics_out.append((name, parts_out))

    if services.config.fsync and acks != 0:
        for partition_log in appended:
            await services.flusher.flush(partition_log)
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed on some partition")
        return None
    if awaiting and replicas is not None:
        await _await_replicas(replicas, version, topics_out, awaiting, request.timeout_ms / 1000)
    response = produce_response(version, topics_out)
    if version >= 10 and services.cluster is not None:
        _add_leader_hints(services.cluster, version, response)
    return response


_HINTED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})  # Produce v10+ hints only this error (KIP-951)


def _add_leader_hints(link: Any, version: int, response: Any) -> None:
    """Each partition answered NOT_LEADER_OR_FOLLOWER, before or after the append, names its
    current leader (:func:`answers.add_leader_hints`)."""
    classes = ProduceResponse[version]
    answered = ((topic.name, p.index, p) for topic in response.responses for p in topic.partition_responses)
    answers.add_leader_hints(link, response, answered, _HINTED,
                             classes.TopicProduceResponse.PartitionProduceResponse.LeaderIdAndEpoch,
                             classes.NodeEndpoint)


async def _await_replicas(replicas: Any, version: int, topics_out: list[tuple[str, list[Any]]],
                          awaiting: list[tuple[int, int, Any, int]], timeout_s: float) -> None:
    """acks=all in a cluster: answer each partition once the high watermark covers its write, or
    with REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND or NOT_LEADER_OR_FOLLOWER (Kafka's
    ``DelayedProduce``); a failed wait keeps the offsets the append was given."""
    codes = await asyncio.gather(*(replicas.wait_for_high_watermark(topics_out[t][0], partition, required, timeout_s)
                                   for t, _p, partition, required in awaiting))
    for (t, p, partition, _required), code in zip(awaiting, codes, strict=True):
        if code != ErrorCode.NONE:
            old = topics_out[t][1][p]
            topics_out[t][1][p] = produce_partition_response(
                version, partition, code, old.base_offset, old.log_append_time_ms,
                getattr(old, "log_start_offset", -1), None, [])
