"""Produce throughput against ``minikafka serve`` in a separate process (issue: broker core).

confluent-kafka produces 1 KiB values with acks=all, idempotence off and on, in the same run,
beside a plain sequential os.write of the same number of bytes to the same disk. Prints MB/s,
records/s and the ratio of each to the plain write (target: idempotent >= 0.7), and the broker
process's CPU time (user + system, /proc/<pid>/stat) per GB appended.

The same producer loop is also run against librdkafka's own in-process mock broker (C, records
kept in memory, nothing written): the most this load generator delivers on this machine with any
broker behind it, and so the highest ratio to the plain write that any broker could show here.

    .venv/bin/python -m bench.produce [--records 200000] [--rounds 3] [--partitions 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from confluent_kafka.admin import AdminClient, NewTopic

from bench._produce import PRODUCER_CONFIG, produce_all, ready_producer
from bench._serve import cpu_seconds, plain_write_seconds, serve


def produce_seconds(bootstrap: str | None, topic: str, records: int, value: bytes, idempotent: bool) -> float:
    """Seconds to deliver ``records`` records; ``bootstrap`` None means librdkafka's mock broker."""
    where = {"bootstrap.servers": bootstrap} if bootstrap else {"test.mock.num.brokers": 1, "log_level": 4}
    producer, chunk = ready_producer({**PRODUCER_CONFIG, **where, "enable.idempotence": idempotent}, topic, value)
    started = time.perf_counter()
    produce_all(producer, topic, chunk, records, 300)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each mode")
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions per topic (default 4: what the mock broker gives the topics it creates)")
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    total = args.records * args.value_size
    broker_cpu = {"plain": 0.0, "idem": 0.0}
    with serve() as (bootstrap, proc, data_dir):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [f"bench-{mode}-{r}" for r in range(args.rounds) for mode in ("plain", "idem")]
        for fut in admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics]).values():
            fut.result(30)
        results: dict[str, list[float]] = {"plain": [], "idem": [], "write": [], "mock-plain": [], "mock-idem": []}
        for r in range(args.rounds):
            for _ in range(3):  # the baseline swings most on this machine: sample it more
                os.sync()
                results["write"].append(plain_write_seconds(total, data_dir))
            for mode in ("plain", "idem"):
                os.sync()
                cpu = cpu_seconds(proc.pid)
                results[mode].append(produce_seconds(bootstrap, f"bench-{mode}-{r}", args.records, value,
                                                     mode == "idem"))
                broker_cpu[mode] += cpu_seconds(proc.pid) - cpu
            results["mock-plain"].append(produce_seconds(None, f"bench-plain-{r}", args.records, value, False))
            results["mock-idem"].append(produce_seconds(None, f"bench-idem-{r}", args.records, value, True))
    best = {k: statistics.median(v) for k, v in results.items()}
    mb = total / 1e6
    print(f"records={args.records} value={args.value_size}B total={mb:.1f} MB, {args.partitions} partitions, "
          f"median of {args.rounds} rounds")
    print(f"plain os.write                       : {mb / best['write']:8.1f} MB/s "
          f"(median of {len(results['write'])}: {mb / max(results['write']):.0f}..{mb / min(results['write']):.0f})")
    for key, label in (("plain", "minikafka, idempotence off"), ("idem", "minikafka, idempotence on "),
                       ("mock-plain", "mock broker, idempotence off"), ("mock-idem", "mock broker, idempotence on ")):
        s = best[key]
        print(f"{label:<37}: {mb / s:8.1f} MB/s {args.records / s:10.0f} records/s  "
              f"ratio to os.write {best['write'] / s:.3f}")
    print(f"minikafka idempotent / non-idempotent: {best['plain'] / best['idem']:.3f}")
    gigabytes = total * args.rounds / 1e9  # appended per mode over all rounds (warm-up records aside)
    print(f"minikafka broker CPU per GB appended: idempotence off {broker_cpu['plain'] / gigabytes:.2f} s, "
          f"on {broker_cpu['idem'] / gigabytes:.2f} s")
    print(f"minikafka / mock broker: idempotence off {best['mock-plain'] / best['plain']:.3f}, "
          f"on {best['mock-idem'] / best['idem']:.3f}")


if __name__ == "__main__":
    main()
