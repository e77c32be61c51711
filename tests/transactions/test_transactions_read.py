"""read_committed over the wire: Fetch and ListOffsets by isolation level, against a real broker.

Transactional batches and markers are written straight into the partition log on the broker's
event loop (``PartitionLog.append_from_client`` / ``append_marker``), so these tests cover the
read side alone; Fetch and ListOffsets go over a real socket with raw requests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from minikafka.broker.embedded import BrokerThread
from minikafka.storage.log import PartitionLog
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic

T = "t"
TS = int(time.time() * 1000)  # recent: old timestamps would make markers roll segments (segment.ms)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def txn_batch(pid: int, seq: int, value: bytes, count: int = 1, epoch: int = 0) -> bytearray:
    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, seq, 1 << 30)
    for i in range(count):
        builder.append(i, TS + i, None, value + (b"-%d" % i if count > 1 else b""), [])
    return bytearray(builder.build())


class Writer:
    """Appends to partition 0 of ``topic`` on the broker's loop thread."""

    def __init__(self, broker: BrokerThread, topic: str = T) -> None:
        self.broker = broker
        self.topic = topic
        self.seqs: dict[int, int] = {}

    @property
    def log(self) -> PartitionLog:
        assert self.broker.broker is not None and self.broker.broker.logs is not None
        plog = self.broker.broker.logs.get_log(self.topic, 0)
        assert plog is not None
        return plog

    def on_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.broker.call(fn, *args)

    def txn(self, pid: int, value: bytes, count: int = 1) -> int:
        seq = self.seqs.get(pid, 0)
        self.seqs[pid] = seq + count
        return self.on_loop(self.log.append_from_client, txn_batch(pid, seq, value, count)).base_offset

    def plain(self, value: bytes) -> int:
        return self.on_loop(self.log.append_from_client, build_batch(value=value, timestamp=TS)).base_offset

    def marker(self, pid: int, commit: bool) -> int:
        return self.on_loop(self.log.append_marker, pid, 0, commit, 0).base_offset


def fetch(client: RawClient, offset: int, isolation: int, max_bytes: int = 1 << 20, version: int = 11,
          max_wait_ms: int = 0, min_bytes: int = 1, topic: str = T, partition: int = 0) -> Any:
    Request = FetchRequest[version]
    Topic = Request.FetchTopic
    fields: dict[str, Any] = dict(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[Topic(topic=topic, partitions=[Topic.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=max_bytes)])],
    )
    if version < 7:
        for name in ("session_id", "session_epoch", "forgotten_topics_data", "rack_id"):
            fields.pop(name)
    if version < 5:
        fields["topics"] = [Topic(topic=topic, partitions=[Topic.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])]
    return client.request(Request(**fields)).responses[0].partitions[0]


def aborted(part: Any) -> list[tuple[int, int]] | None:
    if part.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in part.aborted_transactions]


def batches(part: Any) -> list[Any]:
    records = MemoryRecords(bytes(part.records or b""))
    out = []
    while records.has_next():
        out.append(records.next_batch())
    return out


def offsets_of(part: Any) -> list[int]:
    return [b.base_offset for b in batches(part)]


def consume_committed(client: RawClient, start: int, max_bytes: int) -> tuple[list[bytes], list[tuple[int, Any]]]:
    """Read to the LSO as a read_committed client does (Kafka's consumer filtering), fetch by
    fetch; returns the delivered values and ``(fetch offset, response)`` of each fetch."""
    delivered: list[bytes] = []
    fetches = []
    position = start
    for _ in range(1000):
        part = fetch(client, position, READ_COMMITTED, max_bytes=max_bytes)
        assert part.error_code == 0
        fetches.append((position, part))
        if position >= part.last_stable_offset:
            return delivered, fetches
        queue = sorted(aborted(part) or [], key=lambda a: a[1])
        aborted_pids: set[int] = set()
        for batch in batches(part):
            while queue and queue[0][1] <= batch.base_offset + batch.last_offset_delta:
                aborted_pids.add(queue.pop(0)[0])
            records = list(batch)
            next_position = batch.base_offset + batch.last_offset_delta + 1
            if batch.is_control_batch:
                if records[0].key[2:4] == b"\x00\x00":  # ABORT
                    aborted_pids.discard(batch.producer_id)
            elif not (batch.is_transactional and batch.producer_id in aborted_pids):
                delivered.extend(r.value for r in records if r.offset >= position)
            position = max(position, next_position)
    raise AssertionError("the reader never reached the last stable offset")


@pytest.fixture
def writer(start_broker: Callable[..., BrokerThread]) -> Writer:
    broker = start_broker()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T, configs={"index.interval.bytes": "1"})  # an offset-index entry per batch
    return Writer(broker)


def _interleaved(w: Writer) -> list[bytes]:
    """An aborted transaction of pid 7 between plain records, an idempotent producer and a
    committed transaction of pid 8; pid 7's next transaction commits. Returns what a
    read_committed reader must see, in order."""
    assert w.txn(7, b"a0") == 0
    assert w.plain(b"p1") == 1
    assert w.txn(7, b"a2") == 2
    assert w.txn(8, b"c3") == 3
    assert w.txn(7, b"a4", count=2) == 4  # @4-5
    assert w.on_loop(w.log.append_from_client, build_batch(9, 0, 0, value=b"i6", timestamp=TS)).base_offset == 6
    assert w.txn(7, b"a7") == 7
    assert w.txn(8, b"c8") == 8
    assert w.marker(7, False) == 9  # index entry (7, 0, 9, lso 3)
    assert w.txn(7, b"c10") == 10
    assert w.plain(b"p11") == 11
    assert w.marker(8, True) == 12
    assert w.marker(7, True) == 13
    return [b"p1", b"c3", b"i6", b"c8", b"c10", b"p11"]


def test_aborted_transaction_over_many_small_fetches_is_listed_in_every_fetch_it_overlaps(writer: Writer) -> None:
    expected = _interleaved(writer)
    with RawClient(writer.broker.bootstrap) as c:
        delivered, fetches = consume_committed(c, 0, max_bytes=1)  # one batch per fetch
        assert delivered == expected
        # the index entry (7, first 0, marker 9, lso 3): listed while the fetch offset is <= 9
        for position, part in fetches[:-1]:
            assert part.last_stable_offset == 14 and part.high_watermark == 14
            assert aborted(part) == ([(7, 0)] if position <= 9 else []), position
        # one big fetch: the same list, and everything up to the LSO
        part = fetch(c, 0, READ_COMMITTED)
        assert aborted(part) == [(7, 0)] and offsets_of(part) == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13]
        assert aborted(fetch(c, 10, READ_COMMITTED)) == []
        # read_uncommitted: a null list, the same last stable offset
        part = fetch(c, 0, READ_UNCOMMITTED)
        assert aborted(part) is None and part.last_stable_offset == 14


def test_a_fetch_ending_before_the_abort_stops_the_search_at_the_entry_whose_lso_reaches_its_bound(
        writer: Writer) -> None:
    w = writer
    assert w.txn(1, b"x") == 0
    assert w.marker(1, False) == 1  # entry (1, 0, 1, lso 2)
    assert w.txn(2, b"y") == 2
    assert w.marker(2, False) == 3  # entry (2, 2, 3, lso 4)
    with RawClient(w.broker.bootstrap) as c:
        # one batch from 0: the bound is the next indexed batch (@1), entry 1's lso 2 >= 1 ends the search
        part = fetch(c, 0, READ_COMMITTED, max_bytes=1)
        assert offsets_of(part) == [0] and aborted(part) == [(1, 0)]
        assert aborted(fetch(c, 0, READ_COMMITTED)) == [(1, 0), (2, 2)]
        assert aborted(fetch(c, 2, READ_COMMITTED, max_bytes=1)) == [(2, 2)]


def test_fetch_at_the_lso_and_between_the_lso_and_the_log_end(writer: Writer) -> None:
    w = writer
    for i in range(3):
        w.plain(b"p%d" % i)  # @0-2
    assert w.txn(5, b"open") == 3
    for i in range(4):
        w.plain(b"q%d" % i)  # @4-7
    with RawClient(w.broker.bootstrap) as c:
        part = fetch(c, 0, READ_COMMITTED)
        assert (part.error_code, part.high_watermark, part.last_stable_offset) == (0, 8, 3)
        assert offsets_of(part) == [0, 1, 2] and aborted(part) == []
        for offset in (3, 5, 8):
            part = fetch(c, offset, READ_COMMITTED)
            assert (part.error_code, part.last_stable_offset, offsets_of(part), aborted(part)) == (0, 3, [], [])
        part = fetch(c, 9, READ_COMMITTED)
        assert (part.error_code, part.high_watermark, part.last_stable_offset, aborted(part)) == (1, -1, -1, None)
        part = fetch(c, 3, READ_UNCOMMITTED)
        assert offsets_of(part) == [3, 4, 5, 6, 7] and aborted(part) is None and part.last_stable_offset == 3
        # Fetch v4 (the first with an isolation level) behaves the same
        part = fetch(c, 0, READ_COMMITTED, version=4)
        assert offsets_of(part) == [0, 1, 2] and part.last_stable_offset == 3 and aborted(part) == []
        w.marker(5, True)
        part = fetch(c, 3, READ_COMMITTED)
        assert offsets_of(part) == [3, 4, 5, 6, 7, 8] and part.last_stable_offset == 9


def list_offsets(client: RawClient, timestamp: int, isolation: int, version: int = 7) -> tuple[int, int, int]:
    Request = ListOffsetsRequest[version]
    Topic = Request.ListOffsetsTopic
    partition: dict[str, Any] = {"partition_index": 0, "timestamp": timestamp}
    if version >= 4:
        partition["current_leader_epoch"] = -1
    request = Request(replica_id=-1, isolation_level=isolation,
                      topics=[Topic(name=T, partitions=[Topic.ListOffsetsPartition(**partition)])])
    part = client.request(request).topics[0].partitions[0]
    return part.error_code, part.offset, part.timestamp


def test_list_offsets_by_isolation_level(writer: Writer) -> None:
    w = writer
    for i in range(3):
        w.on_loop(w.log.append_from_client, build_batch(value=b"p", timestamp=TS + i))  # @0-2
    w.txn(5, b"open")  # @3, timestamp TS
    for i in range(4):
        w.on_loop(w.log.append_from_client, build_batch(value=b"q", timestamp=TS + 10 + i))  # @4-7
    with RawClient(w.broker.bootstrap) as c:
        assert list_offsets(c, -1, READ_COMMITTED) == (0, 3, -1)
        assert list_offsets(c, -1, READ_UNCOMMITTED) == (0, 8, -1)
        assert list_offsets(c, -1, READ_COMMITTED, version=2) == (0, 3, -1)
        assert list_offsets(c, -2, READ_COMMITTED) == (0, 0, -1)
        # a timestamp found below the LSO is answered for both levels
        assert list_offsets(c, TS + 1, READ_COMMITTED) == (0, 1, TS + 1)
        # at or beyond the LSO: -1, -1 for read_committed only
        assert list_offsets(c, TS + 11, READ_COMMITTED) == (0, -1, -1)
        assert list_offsets(c, TS + 11, READ_UNCOMMITTED) == (0, 5, TS + 11)
        assert list_offsets(c, -3, READ_COMMITTED) == (0, -1, -1)  # max timestamp is @7
        assert list_offsets(c, -3, READ_UNCOMMITTED) == (0, 7, TS + 13)
        w.marker(5, True)
        assert list_offsets(c, -1, READ_COMMITTED) == (0, 9, -1)
        assert list_offsets(c, TS + 11, READ_COMMITTED) == (0, 5, TS + 11)


def test_read_committed_long_poll_waits_for_the_marker_not_for_data_behind_the_open_transaction(
        writer: Writer) -> None:
    w = writer
    w.txn(5, b"open")  # @0
    result: dict[str, Any] = {}

    def poll() -> None:
        with RawClient(w.broker.bootstrap) as c:
            result["part"] = fetch(c, 0, READ_COMMITTED, max_wait_ms=20_000)
            result["done"] = time.monotonic()

    t = threading.Thread(target=poll)
    t.start()
    w.plain(b"behind")  # readable for read_uncommitted only: must not end the wait
    # A bounded wait on purpose: it shows the poll does NOT end within 0.5 s of that append
    # (no condition can show that nothing happened).
    time.sleep(0.5)
    assert "part" not in result
    marked = time.monotonic()
    w.marker(5, True)
    t.join(15)
    part = result["part"]
    assert offsets_of(part) == [0, 1, 2] and part.last_stable_offset == 3
    assert result["done"] - marked < 5


def test_describe_producers_reports_the_open_transactions_start_offset(writer: Writer) -> None:
    w = writer
    w.plain(b"p")
    w.txn(5, b"open", count=2)  # @1-2
    w.txn(6, b"done")  # @3
    w.marker(6, True)
    Request = DescribeProducersRequest[0]
    request = Request(topics=[Request.TopicRequest(name=T, partition_indexes=[0])])
    with RawClient(w.broker.bootstrap) as c:
        part = c.request(request).topics[0].partitions[0]
    states = {p.producer_id: p.current_txn_start_offset for p in part.active_producers}
    assert states == {5: 1, 6: -1}


@pytest.mark.parametrize("clean", [True, False])
def test_restart_keeps_open_transactions_and_aborted_ones_invisible(
        start_broker: Callable[..., BrokerThread], clean: bool) -> None:
    # no recovery-point checkpoint during the test: after the crash every segment is re-validated
    broker = start_broker({"log.flush.offset.checkpoint.interval.ms": 3_600_000})
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T, configs={"index.interval.bytes": "1", "segment.bytes": "400"})  # several segments
    w = Writer(broker)
    expected = _interleaved(w)
    w.txn(20, b"a-late", count=3)  # aborted in the last, unflushed segment
    w.txn(21, b"still-open")
    w.marker(20, False)
    before: dict[str, Any] = {}
    with RawClient(broker.bootstrap) as c:
        delivered, _ = consume_committed(c, 0, max_bytes=1)
        assert delivered == expected
        before["views"] = [(aborted(p), p.last_stable_offset, offsets_of(p))
                           for p in (fetch(c, o, READ_COMMITTED, max_bytes=1) for o in range(w.log.log_end_offset))]
        before["lso"] = w.log.last_stable_offset
    index_files = {p.name: p.read_bytes() for p in w.log.dir.glob("*.txnindex")}
    assert len(w.log.segments) > 2 and len(index_files) >= 2
    active = w.log.segments[-1]
    assert active.txn_index.entries[-1].producer_id == 20  # the last abort is in the active segment
    directory = w.log.dir
    broker.stop(clean=clean)
    if not clean:  # the active segment was never flushed: its index may be lost, recovery rebuilds it
        active.txn_index.path.unlink()
    broker.start()
    with RawClient(broker.bootstrap) as c:
        delivered, _ = consume_committed(c, 0, max_bytes=1)
        assert delivered == expected
        after = [(aborted(p), p.last_stable_offset, offsets_of(p))
                 for p in (fetch(c, o, READ_COMMITTED, max_bytes=1) for o in range(w.log.log_end_offset))]
    assert after == before["views"]
    assert w.log.last_stable_offset == before["lso"] == 17  # pid 21 holds it
    assert {p.name: p.read_bytes() for p in directory.glob("*.txnindex")} == index_files
    w.marker(21, True)
    with RawClient(broker.bootstrap) as c:
        delivered, _ = consume_committed(c, 0, max_bytes=1 << 20)
    assert delivered == [*expected, b"still-open"]


def test_fetch_lists_an_aborted_transaction_that_started_in_an_older_segment(writer: Writer) -> None:
    w = writer
    for i in range(100):
        w.plain(b"p%d" % i)  # @0-99
    assert w.txn(7, b"t", count=50) == 100  # @100-149
    w.on_loop(w.log.roll)  # segment 150
    for i in range(10):
        w.plain(b"q%d" % i)  # @150-159
    assert w.marker(7, False) == 160
    assert (w.log.dir / "00000000000000000150.txnindex").exists()
    assert not (w.log.dir / "00000000000000000000.txnindex").exists()
    with RawClient(w.broker.bootstrap) as c:
        part = fetch(c, 120, READ_COMMITTED)  # reads segment 0 only: the bound is segment 150's base
        assert offsets_of(part) == [100] and aborted(part) == [(7, 100)]
        part = fetch(c, 150, READ_COMMITTED)
        assert offsets_of(part)[0] == 150 and aborted(part) == [(7, 100)]
        assert aborted(fetch(c, 161, READ_COMMITTED)) == []
        delivered, _ = consume_committed(c, 0, max_bytes=1 << 20)
    assert delivered == [b"p%d" % i for i in range(100)] + [b"q%d" % i for i in range(10)]
