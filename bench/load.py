"""Load: many connections and idempotent producers at once, with hostile clients alongside.

``connections`` client connections each own ``producers / connections`` idempotent producer
ids (from InitProducerId) and produce batches round-robin for ``seconds``, one request in flight
per connection; every ``retry_every``-th batch is sent twice, as a client retry would, and the
second answer must be the first one's offset. Meanwhile ``slow_readers`` connections pipeline
large Fetches and never read, and ``slowloris`` connections trickle a request one byte at a
time. At the end every partition is read back: each acknowledged batch must be stored exactly
once, at the offset it was acknowledged with, and nothing else may be stored.

The broker runs as ``minikafka serve`` in a child process; its resident memory is sampled from
/proc. Loopback only; every loop is bounded by the run's deadline.

    .venv/bin/python -m bench.load                      # 1,000 connections, 10,000 producers, 60 s
    .venv/bin/python -m bench.load --connections 100 --producers 1000 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import struct
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import crc32c
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import InitProducerIdRequest

from minikafka.storage.batch import split_batches

TOPIC = "load"
BULK_TOPIC = "load-bulk"  # big batches for the slow readers to fetch (and not read)
PRODUCE_VERSION = 8  # the last non-flexible Produce: easy to encode by hand, fast to parse


@dataclass
class LoadConfig:
    connections: int = 1000
    producers: int = 10_000
    seconds: float = 60.0
    partitions: int = 8
    records_per_batch: int = 5
    value_bytes: int = 100
    retry_every: int = 50
    slow_readers: int = 10
    slowloris: int = 50


@dataclass
class LoadResult:
    config: dict[str, Any]
    batches_acked: int = 0
    records_acked: int = 0
    duplicate_retries: int = 0
    duplicate_mismatches: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    batches_per_second: float = 0.0
    records_per_second: float = 0.0
    megabytes_per_second: float = 0.0
    latency_ms_p50: float = 0.0
    latency_ms_p99: float = 0.0
    latency_ms_p999: float = 0.0
    latency_ms_max: float = 0.0
    requests_over_1s: int = 0
    connect_ms_max: float = 0.0
    slowest_connection_batches: int = 0
    stored_batches: int = 0
    lost_batches: int = 0
    duplicated_batches: int = 0
    misplaced_batches: int = 0
    unexpected_batches: int = 0
    hostile_closed_by_broker: int = 0
    hostile_total: int = 0
    rss_mb_start: float = 0.0
    rss_mb_peak: float = 0.0
    rss_mb_end: float = 0.0

    @property
    def ok(self) -> bool:
        return (not self.errors and not self.lost_batches and not self.duplicated_batches and not self.misplaced_batches
                and not self.unexpected_batches and not self.duplicate_mismatches and self.batches_acked > 0)


# ----------------------------------------------------------------------------- wire helpers


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def record_batch(producer_id: int, epoch: int, base_sequence: int, values: list[bytes], timestamp: int) -> bytes:
    """A RecordBatch v2 (uncompressed, no keys or headers) as an idempotent producer sends it."""
    records = bytearray()
    for delta, value in enumerate(values):
        body = b"\x00" + _varint(0) + _varint(delta) + _varint(-1) + _varint(len(value)) + value + _varint(0)
        records += _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, timestamp, timestamp, producer_id, epoch, base_sequence,
                            len(values)) + records
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # partition leader epoch, magic, crc, rest
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + after_crc


def produce_frame(correlation_id: int, partition: int, batch: bytes, topic_name: str = TOPIC) -> bytes:
    client = b"load"
    topic = topic_name.encode()
    body = (struct.pack(">hhih", 0, PRODUCE_VERSION, correlation_id, len(client)) + client
            + struct.pack(">hhii", -1, -1, 30000, 1) + struct.pack(">h", len(topic)) + topic
            + struct.pack(">iii", 1, partition, len(batch)) + batch)
    return struct.pack(">i", len(body)) + body


def parse_produce_answer(frame: bytes) -> tuple[int, int, int]:
    """(correlation id, error code, base offset) of a single-partition Produce v8 answer."""
    (correlation,) = struct.unpack_from(">i", frame, 0)
    pos = 4 + 4  # topic count
    (name_len,) = struct.unpack_from(">h", frame, pos)
    pos += 2 + name_len + 4 + 4  # name, partition count, index
    error, base_offset = struct.unpack_from(">hq", frame, pos)
    return correlation, error, base_offset


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Any, correlation_id: int) -> Any:
    request.with_header(correlation_id=correlation_id, client_id="load")
    writer.write(bytes(request.encode(framed=True, header=True)))
    frame = await read_frame(reader)
    return request.header.get_response_class().decode(frame, header=True)


# ----------------------------------------------------------------------------- clients


@dataclass
class Producer:
    producer_id: int
    epoch: int
    partition: int
    next_sequence: int = 0
    acked: dict[int, int] = field(default_factory=dict)  # base sequence -> acknowledged base offset


@dataclass
class Stats:
    batches: int = 0
    records: int = 0
    bytes: int = 0
    duplicate_retries: int = 0
    duplicate_mismatches: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    connect_seconds: list[float] = field(default_factory=list)
    per_connection: list[int] = field(default_factory=list)


async def producing_connection(host: str, port: int, producers: list[Producer], deadline: float, cfg: LoadConfig,
                               stats: Stats, index: int) -> None:
    connect_started = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    stats.connect_seconds.append(time.perf_counter() - connect_started)
    correlation = 0
    sent = 0
    payload = b"x" * max(0, cfg.value_bytes - 24)
    try:
        while time.monotonic() < deadline:
            producer = producers[sent % len(producers)]
            sequence = producer.next_sequence
            values = [b"%d:%d:%s" % (producer.producer_id, sequence + i, payload) for i in range(cfg.records_per_batch)]
            batch = record_batch(producer.producer_id, producer.epoch, sequence, values, int(time.time() * 1000))
            attempts = 2 if cfg.retry_every and sent % cfg.retry_every == cfg.retry_every - 1 else 1
            first_offset = None
            for attempt in range(attempts):
                correlation += 1
                started = time.perf_counter()
                writer.write(produce_frame(correlation, producer.partition, batch))
                answer = await read_frame(reader)
                stats.latencies.append(time.perf_counter() - started)
                got_correlation, error, base_offset = parse_produce_answer(answer)
                if got_correlation != correlation:
                    stats.errors["correlation-mismatch"] += 1
                    return
                if error:
                    stats.errors[f"produce-error-{error}"] += 1
                    return  # an idempotent producer with an error is a failed run: stop this connection
                if attempt == 0:
                    first_offset = base_offset
                elif base_offset == first_offset:
                    stats.duplicate_retries += 1
                else:
                    stats.duplicate_mismatches += 1
            assert first_offset is not None
            producer.acked[sequence] = first_offset
            producer.next_sequence += cfg.records_per_batch
            stats.batches += 1
            stats.records += cfg.records_per_batch
            stats.bytes += len(batch)
            stats.per_connection[index] += 1
            sent += 1
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        stats.errors[f"connection-{type(exc).__name__}"] += 1
    finally:
        writer.close()


async def slow_reader(host: str, port: int, deadline: float) -> bool:
    """Pipelines big Fetches and never reads; True when the broker closed the connection."""
    reader, writer = await asyncio.open_connection(host, port)
    R = FetchRequest[11]
    request = R(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, topics=[R.FetchTopic(topic=BULK_TOPIC, partitions=[R.FetchTopic.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                    partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    request.with_header(correlation_id=1, client_id="slow-reader")
    try:
        writer.write(bytes(request.encode(framed=True, header=True)) * 500)
        transport = writer.transport
        transport.pause_reading()  # never read: the kernel buffers fill and stay full
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        # now read what is there: a broker that dropped us ends the stream before 500 answers
        transport.resume_reading()
        for _ in range(500):
            await asyncio.wait_for(read_frame(reader), 2.0)
        return False
    except (ConnectionError, asyncio.IncompleteReadError):
        return True
    except TimeoutError:
        return False
    finally:
        writer.close()


async def slowloris(host: str, port: int, deadline: float) -> bool:
    """Announces a 1000-byte request and sends it one byte a second; True when the broker closed it."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(struct.pack(">i", 1000))
        while time.monotonic() < deadline:
            writer.write(b"\x00")
            await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(1), 1.0) == b"":
                    return True
            except TimeoutError:
                pass
        return False
    except ConnectionError:
        return True
    finally:
        writer.close()


# ----------------------------------------------------------------------------- the run


async def setup(host: str, port: int, cfg: LoadConfig) -> list[Producer]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        C = CreateTopicsRequest[5]
        answer = await call(reader, writer, C(topics=[
            C.CreatableTopic(name=TOPIC, num_partitions=cfg.partitions, replication_factor=1, assignments=[],
                             configs=[]),
            C.CreatableTopic(name=BULK_TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10000, validate_only=False), 1)
        assert all(t.error_code in (0, 36) for t in answer.topics), answer
        for i in range(16):  # ~8 MB: every Fetch of a slow reader is answered with ~1 MB
            batch = record_batch(-1, -1, -1, [bytes([i]) * 100_000] * 5, int(time.time() * 1000))
            writer.write(produce_frame(100 + i, 0, batch, BULK_TOPIC))
            assert parse_produce_answer(await read_frame(reader))[1] == 0
    finally:
        writer.close()

    async def allocate(count: int, start: int) -> list[Producer]:
        r, w = await asyncio.open_connection(host, port)
        out = []
        try:
            for i in range(count):
                got = await call(r, w, InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=-1), i)
                assert got.error_code == 0, got
                out.append(Producer(got.producer_id, got.producer_epoch, (start + i) % cfg.partitions))
        finally:
            w.close()
        return out

    per = -(-cfg.producers // 20)
    chunks = await asyncio.gather(*(allocate(min(per, cfg.producers - s), s) for s in range(0, cfg.producers, per)))
    return [p for chunk in chunks for p in chunk]


async def read_back(host: str, port: int, partitions: int) -> dict[int, list[tuple[int, int, int, int]]]:
    """Per partition: (base offset, producer id, base sequence, record count) of every stored batch."""
    reader, writer = await asyncio.open_connection(host, port)
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    R = FetchRequest[11]
    correlation = 0
    try:
        for partition in range(partitions):
            batches: list[tuple[int, int, int, int]] = []
            offset = 0
            for _ in range(1_000_000):
                correlation += 1
                answer = await call(reader, writer, R(
                    replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=16 << 20, isolation_level=0, session_id=0,
                    session_epoch=-1, topics=[R.FetchTopic(topic=TOPIC, partitions=[R.FetchTopic.FetchPartition(
                        partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                        partition_max_bytes=16 << 20)])], forgotten_topics_data=[], rack_id=""), correlation)
                part = answer.responses[0].partitions[0]
                assert part.error_code == 0, part
                found = [(h.base_offset, h.producer_id, h.base_sequence, h.records_count)
                         for _pos, h in split_batches(part.records or b"") if h.next_offset > offset]
                batches.extend(found)
                if not found or found[-1][0] + found[-1][3] >= part.high_watermark:
                    break
                offset = found[-1][0] + found[-1][3]
            out[partition] = batches
    finally:
        writer.close()
    return out


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def run(bootstrap: str, cfg: LoadConfig, broker_pid: int | None = None) -> LoadResult:
    host, _, port_text = bootstrap.rpartition(":")
    port = int(port_text)
    result = LoadResult(config=asdict(cfg))
    producers = await setup(host, port, cfg)
    if broker_pid:
        result.rss_mb_start = rss_mb(broker_pid)
    groups = [producers[i::cfg.connections] for i in range(cfg.connections)]
    stats = Stats(per_connection=[0] * cfg.connections)
    started = time.monotonic()
    deadline = started + cfg.seconds
    hostile = [asyncio.create_task(slow_reader(host, port, deadline)) for _ in range(cfg.slow_readers)]
    hostile += [asyncio.create_task(slowloris(host, port, deadline)) for _ in range(cfg.slowloris)]
    workers = []
    for start in range(0, cfg.connections, 100):  # open in waves: the listen backlog is finite
        workers += [asyncio.create_task(producing_connection(host, port, groups[i], deadline, cfg, stats, i))
                    for i in range(start, min(start + 100, cfg.connections)) if groups[i]]
        await asyncio.sleep(0.05)

    async def sample_memory() -> None:
        while broker_pid and time.monotonic() < deadline:
            result.rss_mb_peak = max(result.rss_mb_peak, rss_mb(broker_pid))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample_memory())
    await asyncio.gather(*workers)
    elapsed = time.monotonic() - started
    closed = await asyncio.gather(*hostile)
    await sampler
    result.hostile_total = len(hostile)
    result.hostile_closed_by_broker = sum(closed)

    stored = await read_back(host, port, cfg.partitions)
    if broker_pid:
        result.rss_mb_end = rss_mb(broker_pid)
        result.rss_mb_peak = max(result.rss_mb_peak, rss_mb(broker_pid, "VmHWM"))
    expected = {(p.producer_id, seq): (p.partition, offset) for p in producers for seq, offset in p.acked.items()}
    seen: Counter[tuple[int, int]] = Counter()
    for partition, batches in stored.items():
        for base_offset, producer_id, base_sequence, count in batches:
            key = (producer_id, base_sequence)
            seen[key] += 1
            if key not in expected:
                result.unexpected_batches += 1
            elif expected[key] != (partition, base_offset) or count != cfg.records_per_batch:
                result.misplaced_batches += 1
    result.stored_batches = sum(len(b) for b in stored.values())
    result.lost_batches = sum(1 for key in expected if key not in seen)
    result.duplicated_batches = sum(n - 1 for n in seen.values() if n > 1)

    latencies = sorted(stats.latencies) or [0.0]
    result.batches_acked = stats.batches
    result.records_acked = stats.records
    result.duplicate_retries = stats.duplicate_retries
    result.duplicate_mismatches = stats.duplicate_mismatches
    result.errors = dict(stats.errors)
    result.seconds = round(elapsed, 2)
    result.batches_per_second = round(stats.batches / elapsed, 1)
    result.records_per_second = round(stats.records / elapsed, 1)
    result.megabytes_per_second = round(stats.bytes / elapsed / 1e6, 2)
    result.latency_ms_p50 = round(statistics.median(latencies) * 1000, 2)
    result.latency_ms_p99 = round(latencies[int(len(latencies) * 0.99) - 1 if len(latencies) > 1 else 0] * 1000, 2)
    result.latency_ms_p999 = round(latencies[int(len(latencies) * 0.999) - 1 if len(latencies) > 1 else 0] * 1000, 2)
    result.latency_ms_max = round(latencies[-1] * 1000, 2)
    result.requests_over_1s = sum(1 for latency in latencies if latency > 1.0)
    result.connect_ms_max = round(max(stats.connect_seconds, default=0.0) * 1000, 2)
    result.slowest_connection_batches = min((n for n, g in zip(stats.per_connection, groups, strict=True) if g),
                                            default=0)
    result.rss_mb_start = round(result.rss_mb_start, 1)
    result.rss_mb_peak = round(result.rss_mb_peak, 1)
    result.rss_mb_end = round(result.rss_mb_end, 1)
    return result


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = LoadConfig()
    for name, value in asdict(defaults).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    parser.add_argument("--idle-ms", type=int, default=10000, help="connections.max.idle.ms of the broker")
    args = parser.parse_args()
    cfg = LoadConfig(**{name: getattr(args, name) for name in asdict(defaults)})

    from bench._serve import serve

    with serve("--config", f"connections.max.idle.ms={args.idle_ms}") as (bootstrap, proc, _directory):
        loop = new_event_loop()
        try:
            result = loop.run_until_complete(run(bootstrap, cfg, proc.pid))
        finally:
            loop.close()
    print(json.dumps(asdict(result), indent=2))
    print("OK" if result.ok else "FAILED", f"(client pid {os.getpid()})")
    raise SystemExit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
