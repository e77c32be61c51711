"""read_committed beside read_uncommitted: consume throughput over the same transactional data.

One confluent-kafka transactional producer fills a topic on one ``minikafka serve``: ``--txns``
transactions of ``--records`` 1 KiB records spread over the partitions, every ``--abort-every``-th
one aborted. Then, per round, a read_committed and a read_uncommitted confluent-kafka consumer each
read the whole topic from offset 0 until partition EOF on every partition, one after the other
(the order alternates between rounds). read_committed fetches stop at the last stable offset and
carry the aborted-transaction list the broker collects from the ``.txnindex`` files; the client
drops the aborted records. Printed per consumer: seconds to the end, log MB/s (the topic's
``.log`` bytes over that time) and records delivered; then the median ratio of the read_committed
time to the read_uncommitted time.

    .venv/bin/python -m bench.read_committed [--rounds 5] [--txns 400] [--records 100] [--abort-every 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench._produce import PRODUCER_CONFIG, produce_all, spread_chunk
from bench._serve import MEMORY_DIR, serve

TOPIC = "rc-bench"


def fill(bootstrap: str, partitions: int, txns: int, records: int, abort_every: int, value: bytes) -> int:
    """Write the transactions; return how many records were committed."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        fut.result(30)
    producer = Producer({**PRODUCER_CONFIG, "bootstrap.servers": bootstrap, "transactional.id": "rc-bench"})
    producer.init_transactions(30)
    chunk = spread_chunk(producer, TOPIC, value, size=records)
    committed = 0
    for i in range(txns):
        producer.begin_transaction()
        produce_all(producer, TOPIC, chunk, records, flush_timeout=30)
        if (i + 1) % abort_every == 0:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += records
    return committed


def read_all(bootstrap: str, partitions: int, isolation: str, group: str) -> tuple[float, int]:
    """Seconds for one consumer to reach the end of every partition, and records delivered."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation,
                         "enable.partition.eof": True, "enable.auto.commit": False, "log_level": 2})
    try:
        started = time.perf_counter()
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        delivered = 0
        while len(at_end) < partitions:
            for msg in consumer.consume(1000, 0.05):
                if msg.error():
                    at_end.add(msg.partition())
                else:
                    delivered += 1
            if time.perf_counter() - started > 300:
                raise RuntimeError(f"{isolation} consumer did not reach the end in 300 s")
        return time.perf_counter() - started, delivered
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--txns", type=int, default=400)
    parser.add_argument("--records", type=int, default=100, help="records per transaction")
    parser.add_argument("--abort-every", type=int, default=4, help="abort every n-th transaction")
    parser.add_argument("--value-size", type=int, default=1024)
    args = parser.parse_args()
    base = MEMORY_DIR
    print(f"value={args.value_size}B, {args.partitions} partitions, {args.txns} transactions of {args.records} "
          f"records, every {args.abort_every}th aborted, {args.rounds} rounds, data dir in {base or 'tmp'}")
    with serve(data_dir_base=base) as (bootstrap, _proc, data_dir):
        committed = fill(bootstrap, args.partitions, args.txns, args.records, args.abort_every,
                         os.urandom(args.value_size))
        ratios = []
        log_bytes = sum(p.stat().st_size for p in Path(data_dir).glob(f"{TOPIC}-*/*.log"))
        print(f"log: {log_bytes / 1e6:.1f} MB, {args.txns * args.records} records, {committed} committed")
        for r in range(args.rounds):
            order = ["read_committed", "read_uncommitted"]
            if r % 2:
                order.reverse()
            seconds = {}
            for isolation in order:
                seconds[isolation], delivered = read_all(bootstrap, args.partitions, isolation, f"g-{r}-{isolation}")
                print(f"  round {r + 1} {isolation}: {seconds[isolation]:.2f} s, "
                      f"{log_bytes / 1e6 / seconds[isolation]:.1f} MB/s of log, {delivered} records", flush=True)
            ratios.append(seconds["read_committed"] / seconds["read_uncommitted"])
    print(f"read_committed/read_uncommitted time to the end: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
