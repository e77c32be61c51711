"""What idempotence costs: produce throughput with it on vs off, and memory per tracked producer.

Throughput: confluent-kafka, 1 KiB values, acks=all, against one ``minikafka serve`` process. An
idempotent and a non-idempotent producer run side by side for a few seconds per round, each to
its own topic, both with max.in.flight 5; the median ratio of their delivered MB/s is printed for
a 3-partition topic (target >= 0.97) and for a 1-partition one. librdkafka keeps only one
idempotent request in flight per partition (its idempotent in-flight limit of 5 is compared
with the count of *messages* in flight), so with one partition the ratio measures the round
trip of one request rather than the cost of idempotence; docs/benchmarks.md has the details.
Broker side: PartitionLog appends with and without a producer id. Memory: bytes per tracked
producer in a partition's producer state with 10,000 producers, each with a full five-batch
window and with a single batch, measured with tracemalloc on the real ProducerStateManager fed
real batch headers.

    .venv/bin/python -m bench.idempotence [--rounds 5] [--seconds 3] [--partitions 3] [--producers 10000]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench._produce import PRODUCER_CONFIG, concurrent_mb_per_s, side_by_side_parser
from bench._serve import MEMORY_DIR, serve
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
    ratios = []
    with tempfile.TemporaryDirectory(dir=MEMORY_DIR) as tmp:
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


def side_by_side_ratios(bootstrap: str, partitions: int, rounds: int, value: bytes, seconds: float) -> list[float]:
    """Per round: MB/s of an idempotent producer over MB/s of a non-idempotent one running at the
    same time against the same broker, each to its own topic with ``partitions`` partitions.

    Both use ``max.in.flight.requests.per.connection=5``, the most librdkafka allows an idempotent
    producer, so that idempotence is the only difference between the two. Topics are deleted
    after each round so the data dir stays small."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ratios = []
    for r in range(rounds):
        topics = {mode: f"idem-{mode}-{partitions}p-{r}" for mode in ("off", "on")}
        for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in topics.values()]).values():
            fut.result(30)
        order = ("off", "on") if r % 2 == 0 else ("on", "off")  # neither thread always starts first
        runs = {mode: ({**PRODUCER_CONFIG, "bootstrap.servers": bootstrap, "enable.idempotence": mode == "on",
                        "max.in.flight.requests.per.connection": 5}, topics[mode]) for mode in order}
        rates = concurrent_mb_per_s(runs, value, seconds, warmup=0.5)
        ratios.append(rates["on"] / rates["off"])
        print(f"  {partitions} partition(s), round {r + 1}: off {rates['off']:.0f} MB/s, on {rates['on']:.0f} MB/s, "
              f"on/off {ratios[-1]:.3f}", flush=True)
        for fut in admin.delete_topics(list(topics.values())).values():
            fut.result(30)
    return ratios


def main() -> None:
    parser = side_by_side_parser(__doc__, rounds=5, partitions=6)
    parser.add_argument("--producers", type=int, default=10_000)
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    base = MEMORY_DIR
    print(f"value={args.value_size}B, acks=all, {args.rounds} rounds of {args.seconds:.0f} s, data dir in {base or 'tmp'}")
    results = {}
    with serve(data_dir_base=base) as (bootstrap, _proc, _dir):
        for partitions in (args.partitions, 1):
            results[partitions] = side_by_side_ratios(bootstrap, partitions, args.rounds, value, args.seconds)
    for partitions, ratios in results.items():
        print(f"on/off throughput ratio, {partitions} partition(s): median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")
    side = broker_side_append_ratio(64, 5)
    print(f"broker-side append, 1 MiB batches, without/with producer id: median {statistics.median(side):.3f} "
          f"(min {min(side):.3f}, max {max(side):.3f})")
    for batches in (5, 1):
        per = bytes_per_producer(args.producers, batches)
        print(f"producer state: {per:.0f} bytes per producer ({args.producers} producers, {batches} batch(es) each)")


if __name__ == "__main__":
    main()
