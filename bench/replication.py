"""What replication costs, and how long a partition is unwritable when its leader crashes.

Throughput: ``minikafka serve --brokers 3`` in a separate process. An idempotent confluent-kafka
producer (acks=all, 1 KiB values, spread round-robin over ``--partitions`` partitions) delivers
``--records`` records to a topic with replication factor 3 and min.insync.replicas=2, and the same
to a topic with replication factor 1 on the same cluster; rounds alternate which goes first.
Prints MB/s of each, the ratio RF3/RF1 per round and its median (goal >= 0.5), the cluster
process's CPU time (user + system, /proc/<pid>/stat) per GB produced, and RF3's CPU per GB over
RF1's. ``--compare CHECKOUT`` runs the same on a second cluster started from another checkout
(e.g. a git worktree of main), its runs alternating with this one's: a before/after in one run.

Requests: 1 MB acks=all Produce requests sent one at a time by a raw client to an RF1 and an RF3
topic of the same kind of cluster: the latency of one replication round, and CPU per GB that does
not depend on how a producer batches on a loaded machine.

Failover: a 3-broker ``ClusterThread`` in this process, a 1-partition topic with RF 3 and
min.insync.replicas=2, and an idempotent acks=all producer in a process of its own writing one
record every ``--interval-ms``. ``--crashes`` times: wait until all three replicas are in sync and
writes are acknowledged, crash the partition's leader (a kill -9), and time from the crash to the
first acknowledgement of a record sent after it; then start the broker again. Prints median and
p99 over the crashes, then reads the partition back and checks that every acknowledged record is
there exactly once. Last, how long stopping the cluster took.

    .venv/bin/python -m bench.replication [--rounds 3] [--records 200000] [--crashes 10]
        [--only throughput --compare ../main]   # before/after: another checkout's cluster alongside
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench._serve import MEMORY_DIR, checkout_env, cpu_seconds, reap, serve
from bench.produce import produce_seconds
from minikafka.broker.embedded import ClusterThread
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import produce

MIN_INSYNC = {"min.insync.replicas": "2"}
Served = tuple[str, "subprocess.Popen[str]", str]  # bootstrap, cluster process, data dir
#: the values of one --only requests batch: with record overhead it stays below max.message.bytes (1 MB)
REQUEST_VALUES_BYTES = 950_000
T = TypeVar("T")


def create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until every future is done
    for fut in admin.create_topics(topics).values():
        fut.result(30)


def throughput(args: argparse.Namespace) -> None:
    """RF3 beside RF1 on one 3-broker cluster, alternating rounds; with ``--compare``, the same
    on a second cluster run from another checkout, its runs alternating with this one's."""
    value = os.urandom(args.value_size)
    total = args.records * args.value_size
    codes = checkouts(args)
    mb_s: dict[tuple[str, str], list[float]] = {(c, m): [] for c in codes for m in ("rf1", "rf3")}
    cpu = dict.fromkeys(mb_s, 0.0)
    with contextlib.ExitStack() as stack:
        clusters = start_clusters(stack, codes)
        for bootstrap, _proc, _dir in clusters.values():
            create_topics(bootstrap, [NewTopic(f"repl-{mode}-{r}", args.partitions, int(mode[-1]),
                                               config=MIN_INSYNC if mode == "rf3" else {})
                                      for r in range(args.rounds) for mode in ("rf1", "rf3")])
        for r in range(args.rounds):
            for code, mode in run_order(codes, r):
                bootstrap, proc, _dir = clusters[code]
                before = cpu_seconds(proc.pid)
                seconds = produce_seconds(bootstrap, f"repl-{mode}-{r}", args.records, value, True)
                cpu[code, mode] += cpu_seconds(proc.pid) - before
                mb_s[code, mode].append(total / seconds / 1e6)
            print(f"round {r + 1}: " + "; ".join(
                f"{code}: RF1 {mb_s[code, 'rf1'][-1]:6.1f} MB/s, RF3 {mb_s[code, 'rf3'][-1]:6.1f} MB/s, "
                f"RF3/RF1 {mb_s[code, 'rf3'][-1] / mb_s[code, 'rf1'][-1]:.3f}" for code in codes), flush=True)
    print(f"records={args.records} value={args.value_size}B total={total / 1e6:.1f} MB per run, "
          f"{args.partitions} partitions, idempotent, acks=all, 3 brokers in one process, data dir in "
          f"{MEMORY_DIR or 'tmp'}; median (range) of {args.rounds} rounds")
    gb = total * args.rounds / 1e9
    for code, checkout in codes.items():
        if len(codes) > 1:
            print(f"{code} ({checkout or 'this checkout'}):")
        for mode, label in (("rf1", "RF1                 "), ("rf3", "RF3, min.insync 2   ")):
            print(f"{label}: {fmt_range(mb_s[code, mode], '.1f')} MB/s, cluster CPU "
                  f"{cpu[code, mode] / gb:.2f} s per GB produced")
        ratios = [a / b for a, b in zip(mb_s[code, "rf3"], mb_s[code, "rf1"], strict=True)]
        print(f"RF3 / RF1 throughput: {fmt_range(ratios, '.3f')}  (goal >= 0.5)")
        print(f"RF3 / RF1 cluster CPU per GB: {cpu[code, 'rf3'] / cpu[code, 'rf1']:.2f}")


def checkouts(args: argparse.Namespace) -> dict[str, str | None]:
    """The code to measure: "this" checkout, and with ``--compare`` the other one."""
    return {"this": None} if args.compare is None else {"this": None, "compare": args.compare}


def start_clusters(stack: contextlib.ExitStack, codes: dict[str, str | None]) -> dict[str, Served]:
    """``minikafka serve --brokers 3`` from each checkout, stopped when ``stack`` closes."""
    return {code: stack.enter_context(serve("--brokers", "3", data_dir_base=MEMORY_DIR, env=checkout_env(checkout)))
            for code, checkout in codes.items()}


def run_order(codes: dict[str, str | None], round_index: int) -> list[tuple[str, str]]:
    """Every (checkout, replication factor) run of a round; odd rounds go in reverse order."""
    runs = [(code, mode) for code in codes for mode in ("rf1", "rf3")]
    return runs if round_index % 2 == 0 else runs[::-1]


def request_rounds(args: argparse.Namespace) -> None:
    """1 MB acks=all Produce requests sent one at a time with a raw client, to an RF1 and an RF3
    topic (1 partition each) of ``minikafka serve --brokers 3``: each request's latency is one
    replication round, and the cluster's CPU per GB does not depend on how a producer batches
    and pipelines on a loaded machine. With ``--compare``, alternating with the other checkout's."""
    batch = build_batch(values=[os.urandom(args.value_size)] * (REQUEST_VALUES_BYTES // args.value_size))
    codes = checkouts(args)
    latency: dict[tuple[str, str], list[float]] = {(c, m): [] for c in codes for m in ("rf1", "rf3")}
    cpu = dict.fromkeys(latency, 0.0)
    with contextlib.ExitStack() as stack:
        clusters = start_clusters(stack, codes)
        leaders = {}
        for code, (bootstrap, _proc, _dir) in clusters.items():
            create_topics(bootstrap, [NewTopic("req-rf1", 1, 1), NewTopic("req-rf3", 1, 3, config=MIN_INSYNC)])
            for mode in ("rf1", "rf3"):
                leaders[code, mode] = stack.enter_context(RawClient(leader_address(bootstrap, f"req-{mode}")))
                produce(leaders[code, mode], f"req-{mode}", batch, acks=-1)  # the followers have caught up
        for r in range(args.rounds):
            for code, mode in run_order(codes, r):
                proc = clusters[code][1]
                before = cpu_seconds(proc.pid)
                for _ in range(args.requests):
                    started = time.perf_counter()
                    answer = produce(leaders[code, mode], f"req-{mode}", batch, acks=-1)
                    latency[code, mode].append(time.perf_counter() - started)
                    if answer.error_code:
                        raise RuntimeError(f"{code} {mode}: Produce answered error {answer.error_code}")
                cpu[code, mode] += cpu_seconds(proc.pid) - before
    gb = args.rounds * args.requests * len(batch) / 1e9
    print(f"{args.requests} acks=all Produce requests of {len(batch) / 1e6:.2f} MB one at a time per run, "
          f"{args.rounds} rounds; latency median (p10..p90), cluster CPU per GB produced")
    for code, checkout in codes.items():
        parts = []
        for mode in ("rf1", "rf3"):
            ms = sorted(t * 1e3 for t in latency[code, mode])
            p10, p90 = ms[len(ms) // 10], ms[len(ms) * 9 // 10]
            parts.append(f"{mode.upper()} {statistics.median(ms):.2f} ({p10:.2f}..{p90:.2f}) ms, "
                         f"{cpu[code, mode] / gb:.2f} s/GB")
        print(f"{code} ({checkout or 'this checkout'}): " + "; ".join(parts)
              + f"; RF3/RF1 CPU per GB {cpu[code, 'rf3'] / cpu[code, 'rf1']:.2f}")


def leader_address(bootstrap: str, topic: str) -> str:
    """host:port of the leader of partition 0 of ``topic``."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    broker = metadata.brokers[metadata.topics[topic].partitions[0].leader]
    return f"{broker.host}:{broker.port}"


def fmt_range(values: list[float], spec: str) -> str:
    return f"{statistics.median(values):{spec}} ({min(values):{spec}}..{max(values):{spec}})"


@dataclass
class AckLog:
    """What the producer process has reported so far, filled by a reader thread."""

    acks: list[tuple[int, float, float]] = field(default_factory=list)  # (seq, sent, acked)
    errors: list[str] = field(default_factory=list)
    done: str | None = None
    changed: threading.Condition = field(default_factory=threading.Condition)

    def read(self, stream: Iterable[str]) -> None:
        for line in stream:
            kind, _, rest = line.strip().partition(" ")
            with self.changed:
                if kind == "ack":
                    seq, sent, acked = rest.split()
                    self.acks.append((int(seq), float(sent), float(acked)))
                elif kind == "err":
                    self.errors.append(rest)
                elif kind == "done":
                    self.done = rest
                self.changed.notify_all()
        with self.changed:
            self.done = self.done or "producer process ended"
            self.changed.notify_all()

    def wait_ack(self, sent_after: float, timeout: float) -> tuple[int, float, float]:
        """The first acknowledgement of a record sent at or after ``sent_after`` (a partition's
        records are acknowledged in order, so the first such line is the earliest)."""
        start = 0

        def first() -> tuple[int, float, float] | None:
            nonlocal start
            for i in range(start, len(self.acks)):
                if self.acks[i][1] >= sent_after:
                    return self.acks[i]
            start = len(self.acks)
            return None

        return wait_for(self.changed, first, timeout, f"no record sent after {sent_after:.3f} acknowledged")


def wait_for(cond: threading.Condition, check: Callable[[], T | None], timeout: float, what: str) -> T:
    """``check()`` once it is not None, re-checked whenever ``cond`` is notified."""
    deadline = time.monotonic() + timeout
    with cond:
        while (found := check()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"{what} within {timeout} s")
            cond.wait(left)
    return found


def wait_in_sync(cluster: ClusterThread, topic: str, timeout: float = 60) -> None:
    """Until every replica of partition 0 is in the ISR again."""
    deadline = time.monotonic() + timeout
    while len((state := cluster.state(topic, 0)).isr) < len(state.replicas):
        if time.monotonic() > deadline:
            raise RuntimeError(f"ISR not full again within {timeout} s: {state}")
        time.sleep(0.05)


def failover(args: argparse.Namespace) -> None:
    """Crash the leader ``args.crashes`` times under a steady idempotent producer."""
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-", dir=MEMORY_DIR) as data_dir:
        cluster = ClusterThread(brokers=3, data_dir=data_dir).start()
        try:
            crash_leaders(cluster, "failover", args)
        finally:
            started = time.monotonic()
            cluster.stop()
            print(f"cluster stopped in {(time.monotonic() - started) * 1e3:.0f} ms", flush=True)


def crash_leaders(cluster: ClusterThread, topic: str, args: argparse.Namespace) -> None:
    """The crash cycles of :func:`failover` and the check of what was acknowledged."""
    bootstrap = cluster.bootstrap
    create_topics(bootstrap, [NewTopic(topic, 1, 3, config=MIN_INSYNC)])
    child = subprocess.Popen(
        [sys.executable, "-m", "bench._steady_producer", bootstrap, topic, str(args.interval_ms),
         str(args.value_size)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    log = AckLog()
    reader = threading.Thread(target=log.read, args=(child.stdout,), name="acks", daemon=True)
    reader.start()
    times: list[float] = []
    fenced: list[float] = []  # crash() returns after the broker stopped and was fenced
    try:
        log.wait_ack(0.0, 60)
        for n in range(args.crashes):
            wait_in_sync(cluster, topic)
            log.wait_ack(time.monotonic(), 30)  # writes flow with the full ISR
            leader = cluster.leader(topic, 0)
            crashed_at = time.monotonic()
            cluster.crash(leader)  # returns once the controller has fenced the broker
            fenced.append(time.monotonic() - crashed_at)
            seq, _sent, acked = log.wait_ack(crashed_at, 60)
            times.append(acked - crashed_at)
            print(f"crash {n + 1}: broker {leader} down, fenced after {fenced[-1] * 1e3:.0f} ms, new leader "
                  f"{cluster.leader(topic, 0)}, first write after the crash acknowledged in "
                  f"{times[-1] * 1e3:.0f} ms (record {seq})", flush=True)
            cluster.start_broker(leader)
        wait_in_sync(cluster, topic)
    finally:
        assert child.stdin is not None
        child.stdin.write("stop\n")
        child.stdin.close()
        reader.join(180)
        reap(child)
    print(f"{args.crashes} leader crashes, 1 partition, RF 3, min.insync.replicas=2, idempotent acks=all "
          f"producer (librdkafka defaults otherwise), one {args.value_size} B record every "
          f"{args.interval_ms} ms")
    print(f"crash to first acknowledged write after it: median {statistics.median(times) * 1e3:.0f} ms, "
          f"p99 {percentile(times, 0.99) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms")
    print(f"of which crash to fenced (ClusterThread.crash returning): median {statistics.median(fenced) * 1e3:.0f} ms, "
          f"p99 {percentile(fenced, 0.99) * 1e3:.0f} ms")
    check_read_back(bootstrap, topic, log)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def check_read_back(bootstrap: str, topic: str, log: AckLog) -> None:
    """Read the partition up to its high watermark; every acknowledged record exactly once."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-bench-check",
                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: Counter[int] = Counter()
        read_to = 0
        deadline = time.monotonic() + 120
        while read_to < high:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read back stopped at offset {read_to} of {high}")
            for msg in consumer.consume(10_000, 1.0):
                key, offset = msg.key(), msg.offset()
                if msg.error() or key is None or offset is None:
                    raise RuntimeError(f"read back: {msg.error() or 'a record without key or offset'}")
                seen[int(key)] += 1
                read_to = offset + 1
    finally:
        consumer.close()
    acked = {seq for seq, _sent, _acked in log.acks}
    missing = sorted(acked - set(seen))
    duplicated = sorted(seq for seq, count in seen.items() if count > 1)
    unacked = len(set(seen) - acked)
    print(f"read back: {len(acked)} acknowledged records, {sum(seen.values())} records in the log "
          f"(offsets 0..{high - 1}); missing {len(missing)} {missing[:5]}, more than once {len(duplicated)} "
          f"{duplicated[:5]}, present but never acknowledged {unacked}; producer errors {len(log.errors)} "
          f"{log.errors[:3]}; producer: {log.done}")
    print("every acknowledged record exactly once: " + ("OK" if not missing and not duplicated else "FAILED"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="records per throughput run")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3, help="alternating RF1/RF3 rounds")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--crashes", type=int, default=10)
    parser.add_argument("--interval-ms", type=float, default=2.0, help="pace of the failover producer")
    parser.add_argument("--requests", type=int, default=100, help="~1 MB Produce requests per run of --only requests")
    parser.add_argument("--only", choices=("throughput", "requests", "failover"))
    parser.add_argument("--compare", metavar="CHECKOUT",
                        help="throughput also on a cluster run from this checkout of minikafka (e.g. a git "
                             "worktree of main), its runs alternating with this one's")
    args = parser.parse_args()
    if args.only in (None, "throughput"):
        throughput(args)
    if args.only in (None, "requests"):
        request_rounds(args)
    if args.only in (None, "failover"):
        failover(args)


if __name__ == "__main__":
    main()
