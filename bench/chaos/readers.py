"""The chaos workload's consumers, each logging its polls, commits and assignments to the history.

- :class:`GroupReader` (confluent-kafka) and :class:`KafkaPythonReader` (kafka-python): members
  of a consumer group, read_committed or read_uncommitted, committing their positions
  synchronously after each poll that returned records.
- :func:`drain`: after the run, one fresh read_committed and one read_uncommitted consumer read
  every partition from its start to its end offset, so every record in the log is in the
  history (what lost-write detection needs).
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from bench.chaos.history import OK, UNKNOWN, History, Rec, tp_key
from bench.chaos.workload import CLIENT_CONFIG, GroupMember, received


class GroupReader(GroupMember):
    """A confluent-kafka group member, read_committed or read_uncommitted."""

    def run(self) -> None:
        consumer = self.subscribed()
        try:
            while not self.stopping.is_set():
                if self.poll(consumer, 50):
                    self._commit(consumer)
                self.stopping.wait(self.pace)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        index, start = self.history.begin()
        try:
            committed = consumer.commit(asynchronous=False) or []
            offsets = {tp_key(tp.topic, tp.partition): tp.offset for tp in committed
                       if tp.error is None and tp.offset >= 0}
            self.history.record(index, start, self.name, "commit", OK, offsets=offsets, group=self.group)
        except KafkaException as exc:
            self.history.record(index, start, self.name, "commit", UNKNOWN, group=self.group, info=str(exc))


class KafkaPythonReader(GroupReader):
    """The same member in kafka-python."""

    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        reader = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                reader.session += 1

            def on_partitions_assigned(self, assigned: Any) -> None:
                reader.session += 1
                reader.history.add(reader.name, "assign", OK, group=reader.group, session=reader.session,
                                   offsets={tp_key(tp.topic, tp.partition): -1 for tp in assigned})

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                                 isolation_level=self.isolation, enable_auto_commit=False,
                                 auto_offset_reset="earliest", session_timeout_ms=6000,
                                 heartbeat_interval_ms=500, request_timeout_ms=7000,
                                 reconnect_backoff_max_ms=500)
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                index, start = self.history.begin()
                try:
                    batches = consumer.poll(500, max_records=50)
                except Exception as exc:  # a failed poll read nothing
                    self.history.record(index, start, self.name, "poll", UNKNOWN, isolation=self.isolation,
                                        group=self.group, session=self.session, info=repr(exc))
                    self.session += 1
                    continue
                reads = tuple(Rec(m.topic, m.partition, m.value.decode(), m.offset)
                              for records in batches.values() for m in records)
                self.history.record(index, start, self.name, "poll", OK, reads=reads, isolation=self.isolation,
                                    group=self.group, session=self.session)
                if reads:
                    self._commit_kafka_python(consumer)
                self.stopping.wait(self.pace)
        finally:
            consumer.close()

    def _commit_kafka_python(self, consumer: Any) -> None:
        from kafka.structs import OffsetAndMetadata

        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        index, start = self.history.begin()
        try:
            consumer.commit({tp: OffsetAndMetadata(pos, "", -1) for tp, pos in positions.items()})
            self.history.record(index, start, self.name, "commit", OK, group=self.group,
                                offsets={tp_key(tp.topic, tp.partition): pos for tp, pos in positions.items()})
        except Exception as exc:  # the commit may or may not have been stored
            self.history.record(index, start, self.name, "commit", UNKNOWN, group=self.group, info=repr(exc))


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark, asked of the broker (retried while it recovers). The
    consumer reads uncommitted: librdkafka's default, read_committed, would ask for the last
    stable offset, and a drain that stopped there would miss what an open transaction holds back."""
    consumer = Consumer({**CLIENT_CONFIG, "bootstrap.servers": bootstrap, "group.id": "chaos-drain",
                         "isolation.level": "read_uncommitted"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def drain(bootstrap: str, topic: str, partitions: int, history: History, isolation: str,
          timeout: float = 90.0) -> bool:
    """Read every partition from offset 0 to its end offset (for read_committed: until the
    end of the partition is at the high watermark, open transactions having ended); True if
    every partition was read to its end within ``timeout`` seconds."""
    ends = end_offsets(bootstrap, topic, partitions)
    process = f"drain-{'rc' if isolation == 'read_committed' else 'ru'}"
    consumer = Consumer({**CLIENT_CONFIG, "bootstrap.servers": bootstrap, "group.id": f"chaos-{process}",
                         "isolation.level": isolation, "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done: set[int] = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + timeout
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            index, start = history.begin()
            messages = consumer.consume(200, 0.5)
            reads = []
            for m in messages:
                error = m.error()
                if error is None:
                    reads.append(received(m))
                elif error.code() == KafkaError._PARTITION_EOF:
                    eof = received(m)
                    if eof.offset is not None and eof.offset >= ends[eof.partition]:
                        done.add(eof.partition)
            history.record(index, start, process, "poll", OK, reads=tuple(reads), isolation=isolation,
                           session=1)
    finally:
        consumer.close()
    return len(done) == partitions
