"""The chaos workload's writers: real clients, each logging every operation to the history.

Every value is unique and names its writer (``"<process>-<n>"``), so the checker can attribute
each read. Writers:

- :class:`IdempotentWriter` (confluent-kafka): ``enable.idempotence``, ``acks=all``, a few sends
  in flight; each send is one ``send`` op, ok with its offset from the delivery report.
- :class:`KafkaPythonWriter` (kafka-python): the same, one send at a time.
- :class:`TxnWriter` (confluent-kafka): transactions of 1–4 records over several partitions,
  some aborted on purpose; a ``txn`` op each.
- :class:`TransformWriter` (confluent-kafka): consume-transform-produce — a read_committed
  member of a group reads, then in one transaction writes one new value and commits the
  group's offsets past what it read (``send_offsets_to_transaction``); it reads the topic it
  writes, so transactions depend on each other's output.

The consumers are in :mod:`bench.chaos.readers`.
"""

from __future__ import annotations

import random
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from bench.chaos.history import FAILED, OK, UNKNOWN, History, Rec, tp_key

#: librdkafka settings every chaos client uses: quiet logs, failures surfacing within the run, and
#: no re-bootstrap when every broker is down (librdkafka 2.16 then decommissions the brokers, and
#: ``send_offsets_to_transaction`` can wait on a decommissioned group coordinator whatever its
#: timeout: https://github.com/confluentinc/librdkafka/issues/5511; a broker that leaves the
#: Metadata answers is decommissioned too, which :meth:`Transactions._send_offsets` outlasts)
CLIENT_CONFIG: dict[str, Any] = {"log_level": 2, "socket.connection.setup.timeout.ms": 5000,
                                 "reconnect.backoff.max.ms": 500, "metadata.recovery.strategy": "none"}
TXN_TIMEOUT_MS = 10_000
#: how long past its timeout a client call may take before the writer gives up on its producer
STUCK_GRACE_SECONDS = 5.0


def received(message: Message) -> Rec:
    """The record a confluent-kafka consumer received."""
    return Rec(message.topic() or "", message.partition() or 0, (message.value() or b"").decode(),
               message.offset())


def served_reports(producer: Producer, flush_seconds: float | None = None) -> bool:
    """Serve the producer's delivery reports (flushing for up to ``flush_seconds``); False if it
    has failed for good (``poll`` and ``flush`` raise a producer's fatal error, such as being
    fenced, every time they are called)."""
    try:
        producer.poll(0) if flush_seconds is None else producer.flush(flush_seconds)
        return True
    except KafkaException:
        return False


class Process:
    """A client on its own thread until :meth:`stop`; ``rng`` is seeded by the run and the name."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, history: History,
                 seed: int, pace: float, run_id: str = "") -> None:
        self.name = name
        self.run_id = run_id
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rng = random.Random(f"{seed}-{name}")
        self.pace = pace
        self.n = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._guarded, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def join(self, timeout: float = 60) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive():
            frame = sys._current_frames().get(self._thread.ident or -1)
            where = traceback.format_stack(frame)[-1].strip().replace("\n", " ") if frame else "?"
            self.errors.append(f"did not stop within {timeout:g} s, at {where}")

    def next_value(self) -> str:
        self.n += 1
        return f"{self.name}-{self.n}"

    def _guarded(self) -> None:
        try:
            self.run()
        except Exception as exc:  # a client that dies ends its process; the report shows why and where
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            self.errors.append(f"{exc!r} at {Path(frame.filename).name}:{frame.lineno}")

    def run(self) -> None:
        raise NotImplementedError


class IdempotentWriter(Process):
    """confluent-kafka idempotent producer; up to ``in_flight`` sends outstanding."""

    in_flight = 4

    def run(self) -> None:
        producer = self._producer()
        pending: dict[int, tuple[float, Rec]] = {}
        while not self.stopping.is_set():
            for _ in range(self.rng.randint(1, self.in_flight)):
                index, start = self.history.begin()
                rec = Rec(self.topic, self.rng.randrange(self.partitions), self.next_value())
                pending[index] = (start, rec)
                try:
                    producer.produce(rec.topic, value=rec.value.encode(), partition=rec.partition,
                                     on_delivery=self._report(index, pending))
                except (BufferError, KafkaException) as exc:
                    self._settle(index, pending, UNKNOWN, None, repr(exc))
            served = served_reports(producer)
            self.stopping.wait(self.pace)
            if not (served and served_reports(producer)) or any("fatal" in err for err in self.errors):
                producer = self._replace(producer, pending)
        served_reports(producer, 30)
        for index in list(pending):
            self._settle(index, pending, UNKNOWN, None, "not delivered when the run ended")

    def _producer(self) -> Producer:
        return Producer({**CLIENT_CONFIG, "bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 2, "message.timeout.ms": 20000})

    def _replace(self, producer: Producer, pending: dict[int, tuple[float, Rec]]) -> Producer:
        """After a fatal error a new producer (a new producer id) takes over."""
        served_reports(producer, 5)
        for index in list(pending):
            self._settle(index, pending, UNKNOWN, None, "producer replaced after a fatal error")
        self.errors[:] = [e for e in self.errors if "fatal" not in e]
        return self._producer()

    def _report(self, index: int, pending: dict[int, tuple[float, Rec]]) -> Any:
        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                self._settle(index, pending, OK, msg.offset(), "")
            else:
                if err.fatal():
                    self.errors.append(f"fatal: {err}")
                self._settle(index, pending, UNKNOWN, None, str(err))
        return on_delivery

    def _settle(self, index: int, pending: dict[int, tuple[float, Rec]], outcome: str, offset: int | None,
                info: str) -> None:
        start, rec = pending.pop(index)
        written = Rec(rec.topic, rec.partition, rec.value, offset)
        self.history.record(index, start, self.name, "send", outcome, writes=(written,), info=info)


class KafkaPythonWriter(Process):
    """kafka-python idempotent producer, one send at a time."""

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True, acks="all",
                                 linger_ms=2, request_timeout_ms=5000, delivery_timeout_ms=20000,
                                 reconnect_backoff_max_ms=500)
        try:
            while not self.stopping.is_set():
                index, start = self.history.begin()
                rec = Rec(self.topic, self.rng.randrange(self.partitions), self.next_value())
                outcome, offset, info = UNKNOWN, None, ""
                try:
                    meta = producer.send(rec.topic, value=rec.value.encode(), partition=rec.partition).get(30)
                    outcome, offset = OK, meta.offset
                except Exception as exc:  # any error leaves the send's fate unknown
                    info = repr(exc)
                self.history.record(index, start, self.name, "send", outcome,
                                    writes=(Rec(rec.topic, rec.partition, rec.value, offset),), info=info)
                self.stopping.wait(self.pace)
        finally:
            producer.close(5)


class StuckCall(Exception):
    """A client call that did not return within its timeout and a grace period."""


class Transactions:
    """One confluent-kafka transactional producer and how each transaction ended; a producer
    stuck in ``send_offsets_to_transaction`` is left to its call and replaced (the new one, with
    the same transactional id, fences it), the transaction recorded unknown."""

    def __init__(self, process: Process, txn_id: str, call_timeout: float = 10) -> None:
        self.process = process
        self.txn_id = txn_id
        self.call_timeout = call_timeout
        self.producer: Producer | None = self._new()

    def _new(self) -> Producer:
        producer = Producer({**CLIENT_CONFIG, "bootstrap.servers": self.process.bootstrap,
                             "transactional.id": self.txn_id, "transaction.timeout.ms": TXN_TIMEOUT_MS,
                             "message.timeout.ms": TXN_TIMEOUT_MS - 1000, "linger.ms": 2})
        self._init(producer)
        return producer

    def _init(self, producer: Producer) -> None:
        for attempt in range(10):
            try:
                producer.init_transactions(10)
                return
            except KafkaException as exc:
                if attempt == 9 or not exc.args[0].retriable() or self.process.stopping.is_set():
                    raise

    def run(self, writes: list[Rec], abort: bool, offsets: list[TopicPartition] | None = None,
            group_metadata: Any = None) -> tuple[str, tuple[Rec, ...], str]:
        """Begin, write, (send offsets), then commit or abort: the outcome, the writes with their
        offsets, and what went wrong."""
        delivered: dict[str, int] = {}

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                delivered[msg.value().decode()] = msg.offset()

        if self.producer is None:  # the last one failed for good: a new one, which fences it
            try:
                self.producer = self._new()
            except KafkaException as exc:
                return FAILED, tuple(writes), f"no producer: {exc.args[0]}"  # nothing was sent
        producer = self.producer
        errors: list[str] = []  # what went wrong on the way, for the history
        try:
            producer.begin_transaction()
            for rec in writes:
                producer.produce(rec.topic, value=rec.value.encode(), partition=rec.partition,
                                 on_delivery=on_delivery)
            if offsets is not None:
                self._send_offsets(producer, offsets, group_metadata)
            if abort:
                producer.flush(10)
                producer.abort_transaction(10)
                return FAILED, self._with_offsets(writes, delivered), "aborted on purpose"
            self._commit(producer, errors)
            return OK, self._with_offsets(writes, delivered), "; ".join(errors)
        except StuckCall as exc:  # the producer is left to its call; a new one fences it
            errors.append(str(exc))
            self.producer = None
            return UNKNOWN, self._with_offsets(writes, delivered), "; ".join(errors)
        except KafkaException as exc:
            errors.append(str(exc.args[0]))
            served_reports(producer)
            outcome = self._recover(producer, exc.args[0], errors)
            return outcome, self._with_offsets(writes, delivered), "; ".join(errors)

    def _send_offsets(self, producer: Producer, offsets: list[TopicPartition], group_metadata: Any) -> None:
        """``send_offsets_to_transaction`` with its timeout, on a thread of its own: StuckCall if it
        has not returned :data:`STUCK_GRACE_SECONDS` after the timeout. librdkafka (2.16) can wait
        past the timeout for a group coordinator it decommissioned when the broker left the
        Metadata answers, until another broker's connection changes state
        (https://github.com/confluentinc/librdkafka/issues/5511,
        https://github.com/confluentinc/librdkafka/issues/5456)."""
        failure: list[KafkaException] = []

        def call() -> None:
            try:
                producer.send_offsets_to_transaction(offsets, group_metadata, self.call_timeout)
            except KafkaException as exc:
                failure.append(exc)

        thread = threading.Thread(target=call, name=f"{self.txn_id}-send-offsets", daemon=True)
        thread.start()
        thread.join(self.call_timeout + STUCK_GRACE_SECONDS)
        if thread.is_alive():
            raise StuckCall(f"send_offsets_to_transaction did not return within its {self.call_timeout:g} s"
                            f" and {STUCK_GRACE_SECONDS:g} s more (librdkafka#5511): producer abandoned")
        if failure:
            raise failure[0]

    @staticmethod
    def _commit(producer: Producer, errors: list[str]) -> None:
        """Commit, retrying a retriable failure (as librdkafka asks: not abort) a few times."""
        for attempt in range(5):
            try:
                producer.commit_transaction(10)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 4:
                    raise
                errors.append(f"commit retried: {exc.args[0]}")

    def _recover(self, producer: Producer, error: KafkaError, errors: list[str]) -> str:
        """Abort after a failed transaction if the client allows it: ``failed`` if the abort went
        through (nothing of it is visible), else ``unknown``, and the next transaction starts a
        new producer (which fences this one; its open transaction gets aborted)."""
        if not error.fatal():
            try:
                producer.abort_transaction(10)
                return FAILED
            except KafkaException as exc:
                errors.append(f"abort failed: {exc.args[0]}")
        self.producer = None  # not flushed: a failed producer raises its fatal error from flush too
        return UNKNOWN

    @staticmethod
    def _with_offsets(writes: list[Rec], delivered: dict[str, int]) -> tuple[Rec, ...]:
        """The writes with the offsets their delivery reports gave."""
        return tuple(Rec(r.topic, r.partition, r.value, delivered.get(r.value)) for r in writes)

    def close(self) -> None:
        if self.producer is not None:
            served_reports(self.producer, 5)


class TxnWriter(Process):
    """Transactions over several partitions; ``abort_rate`` of them aborted on purpose."""

    abort_rate = 0.2

    def run(self) -> None:
        txns = Transactions(self, f"chaos-{self.run_id}-{self.name}")
        try:
            while not self.stopping.is_set():
                count = self.rng.randint(1, 4)
                writes = [Rec(self.topic, self.rng.randrange(self.partitions), self.next_value()) for _ in range(count)]
                abort = self.rng.random() < self.abort_rate
                index, start = self.history.begin()
                outcome, written, info = txns.run(writes, abort)
                self.history.record(index, start, self.name, "txn", outcome, writes=written, txn_id=txns.txn_id,
                                    info=info)
                self.stopping.wait(self.pace)
        finally:
            txns.close()


class GroupMember(Process):
    """A confluent-kafka consumer in ``group``; its session grows at each assignment, revocation
    and seek, and each poll is logged."""

    def __init__(self, *args: Any, group: str, isolation: str = "read_committed", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group = group
        self.isolation = isolation
        self.session = 0

    def subscribed(self) -> Consumer:
        consumer = Consumer({**CLIENT_CONFIG, "bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "isolation.level": self.isolation, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                             "heartbeat.interval.ms": 500})
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        return consumer

    def poll(self, consumer: Consumer, most: int) -> tuple[Rec, ...]:
        index, start = self.history.begin()
        messages = consumer.consume(most, 0.5)
        reads = tuple(received(m) for m in messages if m.error() is None)
        self.history.record(index, start, self.name, "poll", OK, reads=reads, isolation=self.isolation,
                            group=self.group, session=self.session)
        return reads

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.session += 1
        self.history.add(self.name, "assign", OK, group=self.group, session=self.session,
                         offsets={tp_key(tp.topic, tp.partition): -1 for tp in partitions})

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.session += 1


class TransformWriter(GroupMember):
    """Consume-transform-produce: read (read_committed, in ``group``), then one transaction that
    writes a value and commits the offsets past the records read."""

    abort_rate = 0.1

    def run(self) -> None:
        consumer = self.subscribed()
        txns = Transactions(self, f"chaos-{self.run_id}-{self.name}")
        try:
            while not self.stopping.is_set():
                reads = self.poll(consumer, 20)
                if reads:
                    self._transform(consumer, txns, reads)
        finally:
            txns.close()
            consumer.close()

    def _transform(self, consumer: Consumer, txns: Transactions, reads: tuple[Rec, ...]) -> None:
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        offsets = {tp_key(tp.topic, tp.partition): tp.offset for tp in positions}
        write = Rec(self.topic, self.rng.randrange(self.partitions), self.next_value())
        abort = self.rng.random() < self.abort_rate
        index, start = self.history.begin()
        outcome, written, info = txns.run([write], abort, positions, consumer.consumer_group_metadata())
        self.history.record(index, start, self.name, "txn", outcome, writes=written, reads=reads,
                            offsets=offsets, txn_id=txns.txn_id, group=self.group, info=info)
        if outcome != OK:
            self._rewind(consumer)

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the group's committed offsets, so what the failed transaction read is read again."""
        self.session += 1
        try:
            for tp in consumer.committed(consumer.assignment(), 10):
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
        except KafkaException as exc:
            self.errors.append(f"rewind: {exc}")
