"""Produce throughput against ``minikafka serve`` in a separate process (issue: broker core).

confluent-kafka produces 1 KiB values with acks=all, idempotence off and on, in the same run,
beside a plain sequential os.write of the same number of bytes to the same disk. Prints MB/s,
records/s and the ratio of each to the plain write (target: idempotent >= 0.7).

    .venv/bin/python bench/produce.py [--records 200000] [--value-size 1024]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench._produce import produce_all
from bench._serve import plain_write_seconds, serve


def produce_seconds(bootstrap: str, topic: str, records: int, value: bytes, idempotent: bool) -> float:
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "compression.type": "none",
    })
    producer.produce(topic, value=b"warm-up")  # metadata and producer id before the clock starts
    producer.flush(30)
    started = time.perf_counter()
    produce_all(producer, topic, [{"value": value} for _ in range(1000)], records, 300)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each mode")
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    total = args.records * args.value_size
    with serve() as (bootstrap, _proc, data_dir):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [f"bench-{mode}-{r}" for r in range(args.rounds) for mode in ("plain", "idem")]
        for fut in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            fut.result(30)
        results: dict[str, list[float]] = {"plain": [], "idem": [], "write": []}
        for r in range(args.rounds):
            os.sync()
            results["write"].append(plain_write_seconds(total, data_dir))
            os.sync()
            results["plain"].append(produce_seconds(bootstrap, f"bench-plain-{r}", args.records, value, False))
            os.sync()
            results["idem"].append(produce_seconds(bootstrap, f"bench-idem-{r}", args.records, value, True))
    best = {k: statistics.median(v) for k, v in results.items()}
    mb = total / 1e6
    print(f"records={args.records} value={args.value_size}B total={mb:.1f} MB, median of {args.rounds} rounds")
    print(f"plain os.write       : {mb / best['write']:8.1f} MB/s")
    for key, label in (("plain", "produce, idempotence off"), ("idem", "produce, idempotence on ")):
        s = best[key]
        print(f"{label}: {mb / s:8.1f} MB/s {args.records / s:10.0f} records/s  "
              f"ratio to os.write {best['write'] / s:.3f}")
    print(f"idempotent / non-idempotent produce: {best['plain'] / best['idem']:.3f}")


if __name__ == "__main__":
    main()
