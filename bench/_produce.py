"""Feed a confluent-kafka producer as fast as the Python side allows, for the benchmarks."""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

#: The producer settings every produce benchmark uses (plus bootstrap and idempotence).
PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "compression.type": "none",
}


def side_by_side_parser(description: str | None, rounds: int, partitions: int) -> argparse.ArgumentParser:
    """The options of a benchmark that runs two producers side by side in rounds."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each side-by-side round")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--partitions", type=int, default=partitions)
    return parser


def spread_chunk(producer: Any, topic: str, value: bytes, size: int = 1000) -> list[dict[str, Any]]:
    """``produce_batch`` entries that cycle through every partition of ``topic``.

    Explicit partitions instead of librdkafka's sticky partitioner (which sends keyless records
    to one partition for ``sticky.partitioning.linger.ms`` at a time): librdkafka keeps only one
    idempotent request in flight per partition, so records sent to one partition at a time would
    measure that limit rather than the broker."""
    partitions = len(producer.list_topics(topic, timeout=30).topics[topic].partitions)
    return [{"value": value, "partition": i % partitions} for i in range(size)]


def ready_producer(config: dict[str, Any], topic: str, value: bytes) -> tuple[Any, list[dict[str, Any]]]:
    """A producer that has delivered one record to ``topic`` (so metadata and its producer id are
    in place before any clock starts), and its :func:`spread_chunk` of ``value``."""
    from confluent_kafka import Producer

    producer = Producer(config)
    producer.produce(topic, value=b"warm-up")
    if producer.flush(30):
        raise RuntimeError(f"warm-up record to {topic} not delivered")
    return producer, spread_chunk(producer, topic, value)


def queue_some(producer: Any, topic: str, batch: list[dict[str, Any]], on_delivery: Any) -> int:
    """Queue what of ``batch`` fits in the producer's queue; when not all of it did, wait 5 ms
    for deliveries to make room. Returns how many were queued."""
    try:
        queued = producer.produce_batch(topic, batch, on_delivery=on_delivery)
    except BufferError:
        queued = 0
    if queued < len(batch):
        producer.poll(0.005)
    return queued


def produce_all(producer: Any, topic: str, chunk: list[dict[str, Any]], records: int, flush_timeout: float) -> None:
    """Queue ``records`` messages cycling through ``chunk`` (``produce_batch`` dicts) and wait for all
    of them to be delivered; raises if any was not."""
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    sent = 0
    while sent < records:
        sent += queue_some(producer, topic, chunk[: records - sent], on_delivery)
    left = producer.flush(flush_timeout)
    if left or errors:
        raise RuntimeError(f"{left} undelivered, errors: {errors[:3]}")


def concurrent_mb_per_s(
    runs: dict[str, tuple[dict[str, Any], str]], value: bytes, seconds: float, warmup: float
) -> dict[str, float]:
    """Run one producer per entry of ``runs`` (name -> (config, topic)) at the same time, each fed
    by its own thread, for ``seconds``; return each one's delivered MB/s over the window that
    starts ``warmup`` seconds in.

    Producers that run side by side meet the same machine at the same moment, so the ratio of
    their rates is not blurred by the drift between rounds that a 2-core machine shows (runs of
    one mode alone vary by a factor of two there)."""
    ready = {name: ready_producer(conf, topic, value) for name, (conf, topic) in runs.items()}
    producers = {name: producer for name, (producer, _chunk) in ready.items()}
    delivered = dict.fromkeys(runs, 0)
    errors: list[object] = []
    stop = threading.Event()
    start = threading.Barrier(len(runs) + 1)
    window = [0.0, 0.0]

    def feed(name: str) -> None:
        (producer, chunk), topic = ready[name], runs[name][1]

        def on_delivery(err: object, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            elif window[0] <= time.perf_counter() <= window[1]:
                delivered[name] += len(msg)

        start.wait()
        try:
            while not stop.is_set():
                if queue_some(producer, topic, chunk, on_delivery) == len(chunk):
                    producer.poll(0)  # deliveries are counted as they come, not at the end
        except Exception as exc:  # reported by the caller, not lost on this thread
            errors.append(exc)

    threads = [threading.Thread(target=feed, args=(name,), name=f"feed-{name}") for name in runs]
    for thread in threads:
        thread.start()
    now = time.perf_counter()
    window[:] = [now + warmup, now + seconds]
    start.wait()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    for name, producer in producers.items():
        if producer.flush(120):
            raise RuntimeError(f"{name}: records left undelivered")
    if errors:
        raise RuntimeError(f"delivery errors: {errors[:3]}")
    return {name: count / (seconds - warmup) / 1e6 for name, count in delivered.items()}
