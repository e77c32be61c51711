"""What idempotence costs: produce throughput with it on vs off, and memory per tracked producer.

Throughput: confluent-kafka, 1 KiB values, acks=all, against one ``minikafka serve`` process;
rounds alternate off/on so drift hits both alike; the median ratio is printed (target >= 0.97).
Memory: bytes per tracked producer in a partition's producer state with 10,000 producers, each
with a full five-batch window and with a single batch, measured with tracemalloc on the real
ProducerStateManager fed real batch headers.

    .venv/bin/python -m bench.idempotence [--records 200000] [--rounds 5] [--producers 10000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench._serve import serve
from bench.produce import produce_seconds
from minikafka.storage.batch import BatchHeader
from minikafka.storage.producer_state import ProducerStateManager


def bytes_per_producer(producers: int, batches_each: int) -> float:
    """Memory the producer state keeps per producer, with realistic (large) offsets and timestamps.

    Headers are built inside the traced window and dropped afterwards, so the integers the
    state keeps from them are counted, as they would be for headers parsed off the wire.
    """
    with tempfile.TemporaryDirectory() as tmp:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        manager = ProducerStateManager(Path(tmp), 86_400_000, lambda: 1_795_000_000_000)
        offset = 1_000_000_000
        for b in range(batches_each):
            for pid in range(producers):
                header = BatchHeader(offset, 49, 0, 2, 0, 0, 9, 1_795_000_000_000 + offset,
                                     1_795_000_000_009 + offset, 7_000_000 + pid, 0, 10 * b, 10)
                manager.check(header)
                manager.update(header, 1_795_000_000_000 + offset)
                offset += 10
        del header
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(manager.producers()) == producers
        return (after - before) / producers


def broker_side_append_ratio(batches: int, rounds: int) -> list[float]:
    """Median time of a PartitionLog append of a 1 MiB batch without / with a producer id, per round.

    This is the broker's own share of the cost of idempotence (header checks, duplicate lookup,
    sequence check, state update), measured without the client and the network in the way. The
    logs live in /dev/shm when it exists, so disk writeback stalls do not drown the difference.
    """
    from minikafka.config import BrokerConfig
    from minikafka.storage.log import PartitionLog
    from tests.kafka_wire import build_batch

    values = [os.urandom(1000) for _ in range(1000)]
    plain = build_batch(values=values)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    ratios = []
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        config = BrokerConfig().topic_defaults() | {"segment.bytes": 64 << 20}
        logs = {mode: PartitionLog.open("b", i, Path(tmp) / f"b-{i}", config) for i, mode in enumerate(("off", "on"))}
        for r in range(rounds):
            idem = [build_batch(producer_id=r + 1, epoch=0, base_sequence=1000 * n, values=values)
                    for n in range(batches)]
            copies = {"off": [bytearray(plain) for _ in range(batches)], "on": [bytearray(b) for b in idem]}
            seconds: dict[str, list[float]] = {"off": [], "on": []}
            for n in range(batches):  # interleaved append by append, so drift hits both alike
                for mode in ("off", "on") if n % 2 else ("on", "off"):
                    started = time.perf_counter()
                    logs[mode].append_from_client(copies[mode][n])
                    seconds[mode].append(time.perf_counter() - started)
            # medians: single appends that hit a page-cache stall say nothing about idempotence
            ratios.append(statistics.median(seconds["off"]) / statistics.median(seconds["on"]))
        for plog in logs.values():
            plog.close()
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--producers", type=int, default=10_000)
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    off: list[float] = []
    on: list[float] = []
    with serve() as (bootstrap, _proc, _dir):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [f"idem-{mode}-{r}" for r in range(args.rounds) for mode in ("off", "on")]
        for fut in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
            fut.result(30)
        for r in range(args.rounds):
            os.sync()
            off.append(produce_seconds(bootstrap, f"idem-off-{r}", args.records, value, False))
            os.sync()
            on.append(produce_seconds(bootstrap, f"idem-on-{r}", args.records, value, True))
    mb = args.records * args.value_size / 1e6
    ratios = [a / b for a, b in zip(off, on, strict=True)]
    print(f"records={args.records} value={args.value_size}B, {args.rounds} alternating rounds")
    print("idempotence off MB/s:", " ".join(f"{mb / s:.0f}" for s in off))
    print("idempotence on  MB/s:", " ".join(f"{mb / s:.0f}" for s in on))
    print(f"on/off throughput ratio: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    side = broker_side_append_ratio(64, 5)
    print(f"broker-side append, 1 MiB batches, without/with producer id: median {statistics.median(side):.3f} "
          f"(min {min(side):.3f}, max {max(side):.3f})")
    for batches in (5, 1):
        per = bytes_per_producer(args.producers, batches)
        print(f"producer state: {per:.0f} bytes per producer ({args.producers} producers, {batches} batch(es) each)")


if __name__ == "__main__":
    main()
