"""What one Fetch costs the broker, per Fetch version: v12 by topic name against v13+ by topic id.

librdkafka 2.x fetches with v16 when the broker offers it, the Java 4.x consumer with v17, and
kafka-python and aiokafka with v12 or lower, so all of these versions are a consumer's hot path.
One ``minikafka serve`` process holds a topic of 4 partitions with 20 records of 1 KB each; a raw
client sends ``--requests`` Fetch requests of each version one after another (the whole topic from
offset 0, min_bytes 0, so every answer carries 80 KB of records) and the broker's CPU time per
request is read from /proc/<pid>/stat. ``--compare CHECKOUT`` runs the same against a second
broker started from another checkout (e.g. a git worktree of main), at the versions it serves.
Runs alternate in order round by round; medians and ranges are printed.

    .venv/bin/python -m bench.fetch_versions [--requests 4000] [--rounds 7] [--compare ../main]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics

from bench._serve import checkout_env, cpu_seconds, serve
from tests.fetch_wire import TOPIC_IDS, fetch_request, topic_id
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce

PARTITIONS = 4
RECORDS = 20
TOPIC = "fetched"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4000, help="Fetch requests per version per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--versions", default="12,13,16,17", help="the versions this checkout is asked with")
    parser.add_argument("--compare", metavar="CHECKOUT", help="also measure Fetch v12 on a broker run from here")
    args = parser.parse_args()
    runs = [("this", int(v)) for v in args.versions.split(",")]
    checkouts = {"this": None} if args.compare is None else {"compare": args.compare, "this": None}
    if args.compare:
        runs.insert(0, ("compare", 12))
    with contextlib.ExitStack() as stack:
        peers = {}
        for code, checkout in checkouts.items():
            bootstrap, proc, _data = stack.enter_context(serve(env=checkout_env(checkout)))
            client = stack.enter_context(RawClient(bootstrap))
            create_topic(client, TOPIC, partitions=PARTITIONS)
            for partition in range(PARTITIONS):
                for _ in range(RECORDS):
                    assert produce(client, TOPIC, build_batch(value=b"x" * 1000), partition=partition).error_code == 0
            peers[code] = (client, proc.pid, topic_id(client, TOPIC))
        cpu: dict[tuple[str, int], list[float]] = {run: [] for run in runs}
        for r in range(args.rounds):
            for code, version in (runs if r % 2 == 0 else runs[::-1]):
                client, pid, tid = peers[code]
                request = fetch_request(version, [(tid if version >= TOPIC_IDS else TOPIC, list(range(PARTITIONS)))])
                before = cpu_seconds(pid)
                for _ in range(args.requests):
                    client.send(request)
                    client.recv_frame()
                cpu[code, version].append((cpu_seconds(pid) - before) / args.requests * 1e6)
    print(f"{args.requests} Fetch requests per run ({PARTITIONS} partitions, {PARTITIONS * RECORDS} records of "
          f"1 KB each), median (range) of {args.rounds} rounds")
    for (code, version), micros in cpu.items():
        print(f"{code:<7} Fetch v{version:<2}: {statistics.median(micros):6.1f} us broker CPU per request "
              f"({min(micros):.1f}..{max(micros):.1f})")


if __name__ == "__main__":
    main()
