"""``python -m bench.chaos``: run the chaos workload (with the nemesis on an in-process broker, or
against any ``--bootstrap`` without one), check the history, print the report; exit 1 on anomalies.

    python -m bench.chaos --seconds 300 --seed 7
    python -m bench.chaos --seconds 300 --seed 7 --brokers 3 --unclean
    python -m bench.chaos --seconds 120 --seed 7 --bootstrap 127.0.0.1:9092 --replication-factor 3
    python -m bench.chaos --check history.jsonl        # check a kept history again
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from confluent_kafka import KafkaException

from bench.chaos import checker
from bench.chaos.history import dump, load
from bench.chaos.run import describe_anomalies, describe_explained, report, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=(
        "Run the chaos workload (with the nemesis on an in-process broker, or against any --bootstrap "
        "without one), check the history and print the report; exit 1 on anomalies."))
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the workload runs (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the fault schedule and the clients' choices")
    parser.add_argument("--bootstrap", help="run against this broker, without the nemesis")
    parser.add_argument("--brokers", type=int, default=1, help="brokers of the in-process cluster (>1: the cluster nemesis)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--replication-factor", type=int, default=1, help="of the topic created (--bootstrap)")
    parser.add_argument("--interval", type=float, default=4.0, help="mean seconds between faults")
    parser.add_argument("--unclean", action="store_true", help=(
        "the topic allows unclean leader elections, and the cluster nemesis makes them (--brokers > 1)"))
    parser.add_argument("--history", type=Path, help="write the history here as JSONL (kept anyway on anomalies)")
    parser.add_argument("--check", type=Path, metavar="HISTORY", help="only check a history written before")
    args = parser.parse_args(argv)
    if args.check is not None:
        return _check_only(args.check)
    if not 1 <= args.brokers <= 16:
        print("--brokers: from 1 to 16", file=sys.stderr)
        return 2
    if args.unclean and args.brokers < 2 and not args.bootstrap:
        print("--unclean: needs --brokers 2 or more (or --bootstrap)", file=sys.stderr)
        return 2
    if args.seconds <= 0 or args.partitions <= 0:
        print("--seconds and --partitions must be positive", file=sys.stderr)
        return 2
    if args.bootstrap:
        try:
            result = run(args.bootstrap, args.seconds, args.seed, None, args.partitions, args.replication_factor,
                         log=_log, unclean=args.unclean)
        except KafkaException as exc:  # the topic could not be created: no broker there, or it refused
            print(f"--bootstrap {args.bootstrap}: {exc.args[0]}", file=sys.stderr)
            return 3
    elif args.brokers > 1:
        from bench.chaos.nemesis import ClusterTarget
        from minikafka.testkit import MiniKafkaCluster

        # faults last 0.3-2.4 s: a session of 1 s makes a broker cut off from the controller for
        # longer a fenced zombie, as Kafka's default of 9 s does to a longer partition
        with MiniKafkaCluster(brokers=args.brokers, config={"log.segment.bytes": 256 * 1024,
                                                             "replica.lag.time.max.ms": 5000,
                                                             "broker.session.timeout.ms": 1000}) as cluster:
            result = run(cluster.bootstrap, args.seconds, args.seed, ClusterTarget(cluster, args.unclean),
                         args.partitions, replication=min(3, args.brokers), interval=args.interval, log=_log,
                         unclean=args.unclean)
    else:
        from bench.chaos.nemesis import SingleBroker
        from minikafka.testkit import MiniKafka

        with MiniKafka(config={"log.segment.bytes": 256 * 1024}) as kafka:
            result = run(kafka.bootstrap, args.seconds, args.seed, SingleBroker(kafka), args.partitions,
                         interval=args.interval, log=_log)
    print(report(result))
    if result.anomalies or args.history:
        path = args.history or Path(tempfile.mkdtemp(prefix="chaos-")) / f"history-{args.seed}.jsonl"
        dump(result.ops, path)
        print(f"history: {path}")
    return 1 if result.anomalies else 0


def _check_only(path: Path) -> int:
    try:
        ops = load(path)
    except (OSError, ValueError, TypeError) as exc:
        print(f"--check {path}: {exc}", file=sys.stderr)
        return 2
    findings = checker.examine(ops)
    by_index = {op.index: op for op in ops}
    print(f"{len(ops)} operations, {len(findings.anomalies)} anomalies, "
          f"{len(findings.explained)} explained by unclean leader elections")
    for line in describe_explained(findings.explained, by_index, 6) + \
            describe_anomalies(findings.anomalies, by_index, len(ops)):
        print(line)
    return 1 if findings.anomalies else 0


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
