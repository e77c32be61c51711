"""What transactions cost: committed transactions/s, and their throughput beside idempotent produce.

confluent-kafka, 1 KiB values, acks=all, against one ``minikafka serve`` process. Per round two
producers run side by side for a few seconds, each to its own topic with the same partitions:
a transactional one sends ``--records`` records per transaction (begin, produce spread over the
partitions, commit) and an idempotent one sends the same records in groups of the same size,
waiting for each group's delivery (the point where a transaction's commit returns). The
transactional producer's extra work per group is AddPartitionsToTxn and EndTxn round trips and,
on the broker, the __transaction_state writes and one marker per partition. Printed: committed
transactions/s, each producer's MB/s, and the median ratio transactional/idempotent.

    .venv/bin/python -m bench.transactions [--rounds 3] [--seconds 3] [--partitions 3] [--records 100 1000]
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench._produce import PRODUCER_CONFIG, produce_all, side_by_side_parser, spread_chunk
from bench._serve import MEMORY_DIR, serve


def _loop(config: dict[str, Any], topic: str, value: bytes, records: int, transactional: bool,
          start: threading.Event, stop: threading.Event, done: list[float]) -> None:
    """Send groups of ``records`` (one transaction each when ``transactional``) until ``stop``;
    append the time each group was finished to ``done``."""
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
    chunk = spread_chunk(producer, topic, value, size=records)
    start.wait()
    while not stop.is_set():
        if transactional:
            producer.begin_transaction()
        produce_all(producer, topic, chunk, records, flush_timeout=30)
        if transactional:
            producer.commit_transaction(30)
        done.append(time.perf_counter())


def side_by_side(bootstrap: str, partitions: int, records: int, value: bytes, seconds: float,
                 round_: int) -> dict[str, float]:
    """Groups/s of the transactional and the idempotent producer over the same window."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = {mode: f"txn-{mode}-{records}-{round_}" for mode in ("idempotent", "transactional")}
    for fut in admin.create_topics([NewTopic(t, partitions, 1) for t in topics.values()]).values():
        fut.result(30)
    start, stop = threading.Event(), threading.Event()
    done: dict[str, list[float]] = {mode: [] for mode in topics}
    threads = []
    for mode, topic in topics.items():
        config = {**PRODUCER_CONFIG, "bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "max.in.flight.requests.per.connection": 5, "log_level": 3}
        if mode == "transactional":
            config["transactional.id"] = f"bench-{records}-{round_}"
        threads.append(threading.Thread(target=_loop, args=(config, topic, value, records, mode == "transactional",
                                                            start, stop, done[mode])))
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # both producers connected and initialised
    begin = time.perf_counter()
    start.set()
    time.sleep(seconds)
    end = time.perf_counter()
    stop.set()
    for thread in threads:
        thread.join(60)
    warm = begin + 0.5
    rates = {mode: sum(1 for t in times if warm <= t <= end) / (end - warm) for mode, times in done.items()}
    for fut in admin.delete_topics(list(topics.values())).values():
        fut.result(30)
    return rates


def main() -> None:
    parser = side_by_side_parser(__doc__, rounds=3, partitions=3)
    parser.add_argument("--records", type=int, nargs="+", default=[100, 1000], help="records per transaction")
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    base = MEMORY_DIR
    print(f"value={args.value_size}B, acks=all, {args.partitions} partitions, {args.rounds} rounds of "
          f"{args.seconds:.0f} s, data dir in {base or 'tmp'}")
    summary = []
    with serve(data_dir_base=base) as (bootstrap, _proc, _dir):
        for records in args.records:
            ratios, txn_rates = [], []
            for r in range(args.rounds):
                rates = side_by_side(bootstrap, args.partitions, records, value, args.seconds, r)
                mb = {mode: rate * records * args.value_size / 1e6 for mode, rate in rates.items()}
                ratios.append(rates["transactional"] / rates["idempotent"])
                txn_rates.append(rates["transactional"])
                print(f"  {records} records/txn, round {r + 1}: {rates['transactional']:.1f} committed txn/s "
                      f"({mb['transactional']:.1f} MB/s), idempotent {mb['idempotent']:.1f} MB/s, "
                      f"ratio {ratios[-1]:.3f}", flush=True)
            summary.append((records, statistics.median(txn_rates), statistics.median(ratios), min(ratios),
                            max(ratios)))
    for records, rate, ratio, low, high in summary:
        print(f"{records} records per transaction: median {rate:.1f} committed transactions/s; "
              f"transactional/idempotent throughput median {ratio:.3f} (min {low:.3f}, max {high:.3f})")


if __name__ == "__main__":
    main()
