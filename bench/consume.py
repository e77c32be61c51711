"""Consume throughput: a confluent-kafka consumer reads the same data from ``minikafka serve`` and
from librdkafka's mock broker, each in its own process, first record to last.

The mock keeps only about 5 MB per partition, so the data is spread over many partitions of at
most ``--partition-mb`` each: topics of 4 partitions (what the mock gives a topic it creates).
Both brokers get the same records (1 KiB random values by default, produced with acks=all before
any clock starts). The consumer assigns every partition from offset 0 (no group protocol) and
counts records and value bytes; the clock runs from the first record received to the last. The
broker's CPU time per GB served (user + system, /proc/<pid>/stat, over the whole consumer session)
is printed too: the consumer, not the broker, sets the pace on a 2-core machine.
Rounds alternate between the two brokers; medians, ranges and the per-round ratio are printed.
``--compare CHECKOUT`` adds a third peer, ``minikafka serve`` run from another checkout (e.g. a git
worktree of main), filled and read the same way in the same rounds: a before/after on one machine
at one time.

    .venv/bin/python -m bench.consume [--records 200000] [--value-size 1024] [--rounds 3] [--compare ../main]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench._mock import mock_broker
from bench._produce import PRODUCER_CONFIG
from bench._serve import checkout_env, cpu_seconds, serve

PARTITIONS_PER_TOPIC = 4


def fill(bootstrap: str, topics: list[str], per_partition: int, value: bytes) -> None:
    """``per_partition`` records in every partition of ``topics`` (each record sent to its
    partition explicitly: the mock drops the oldest data of a partition that grows past ~5 MB)."""
    producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": bootstrap, "enable.idempotence": False})
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            for _ in range(per_partition):
                while True:
                    try:
                        producer.produce(topic, value, partition=partition, on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.005)
    if producer.flush(120) or errors:
        raise RuntimeError(f"records not delivered: {errors[:3]}")


def consume_seconds(bootstrap: str, topics: list[str], expected: int) -> tuple[float, int]:
    """Seconds from the first record to the last, and the value bytes read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-consume", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "log_level": 3})
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(PARTITIONS_PER_TOPIC)])
    count = 0
    size = 0
    first = 0.0
    deadline = time.monotonic() + 300
    try:
        while count < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {count} of {expected} records in 300 s")
            for message in consumer.consume(10_000, 1.0):
                if message.error():
                    raise RuntimeError(str(message.error()))
                if not count:
                    first = time.perf_counter()
                count += 1
                size += len(message.value())
        last = time.perf_counter()
    finally:
        consumer.close()
    if count != expected:
        raise RuntimeError(f"read {count} records, expected {expected}")
    return last - first, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--partition-mb", type=float, default=4.0, help="at most this much data per partition")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", metavar="CHECKOUT",
                        help="also read from minikafka run from this checkout (e.g. a git worktree of main)")
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    per_partition = int(args.partition_mb * 1e6 // (args.value_size + 70))  # ~70 B of record overhead
    per_topic = per_partition * PARTITIONS_PER_TOPIC
    topics = [f"consume-{i}" for i in range(-(-args.records // per_topic))]
    total = per_topic * len(topics)
    with contextlib.ExitStack() as stack:
        served = {"minikafka": stack.enter_context(serve())}
        if args.compare:
            served["compare"] = stack.enter_context(serve(env=checkout_env(args.compare)))
        peers = {name: bootstrap for name, (bootstrap, _proc, _data) in served.items()}
        pids = {name: proc.pid for name, (_bootstrap, proc, _data) in served.items()}
        for bootstrap in peers.values():
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for future in admin.create_topics([NewTopic(t, PARTITIONS_PER_TOPIC, 1) for t in topics]).values():
                future.result(30)
        peers["mock"], mock_proc = stack.enter_context(mock_broker())
        pids["mock"] = mock_proc.pid
        cpu: dict[str, list[float]] = {name: [] for name in peers}
        for bootstrap in peers.values():
            fill(bootstrap, topics, per_partition, value)
        results: dict[str, list[float]] = {name: [] for name in peers}
        order = list(peers)
        for r in range(args.rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                before = cpu_seconds(pids[name])
                seconds, size = consume_seconds(peers[name], topics, total)
                cpu[name].append((cpu_seconds(pids[name]) - before) / (size / 1e9))
                results[name].append(size / seconds / 1e6)
                print(f"round {r + 1} {name:<9}: {size / seconds / 1e6:7.1f} MB/s of values "
                      f"({total} records in {seconds:.2f} s), broker CPU {cpu[name][-1]:.2f} s per GB", flush=True)
    print(f"{total} records of {args.value_size} B in {len(topics)} topics x {PARTITIONS_PER_TOPIC} partitions "
          f"({per_partition} records each), median (range) of {args.rounds} rounds")
    for name, rates in results.items():
        print(f"{name:<9}: {statistics.median(rates):7.1f} MB/s ({min(rates):.1f}..{max(rates):.1f}), "
              f"broker CPU {statistics.median(cpu[name]):.2f} s per GB of values served")
    for name in [n for n in peers if n != "mock"]:
        ratios = [a / b for a, b in zip(results[name], results["mock"], strict=True)]
        print(f"{name} / mock: {statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})  (target >= 0.9)")
    if args.compare:
        ratios = [a / b for a, b in zip(results["minikafka"], results["compare"], strict=True)]
        print(f"minikafka / compare: {statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})")


if __name__ == "__main__":
    main()
