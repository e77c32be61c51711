"""Crash test with real processes (issue: snapshots and crash recovery).

``minikafka serve`` runs in a child process under load from idempotent producers of
confluent-kafka, kafka-python and aiokafka. A seeded killer sends SIGKILL at random moments
and restarts the broker on the same data dir and port; the producers keep retrying and finish.
A consumer then must find every acknowledged record exactly once and in per-partition order.
The number of retries answered from the duplicate cache after a restart is reported (it comes
from the broker's log, one line per duplicate).
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.client_helpers import Rec, confluent_consume

SEED = 20261122
RECORDS_PER_CLIENT = 15000
PARTITIONS = 2
KILLS = 6


class BrokerProcess:
    """``minikafka serve`` on a fixed port, killable and restartable; stderr kept per run."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.runs: list[Path] = []
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log_path = self.data_dir.parent / f"broker-run-{len(self.runs)}.log"
        self.runs.append(log_path)
        with open(log_path, "wb") as stderr:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "minikafka", "serve", "--port", str(self.port), "--data-dir",
                 str(self.data_dir), "--config", "num.partitions=2", "--config", "log.segment.bytes=65536"],
                stdout=subprocess.DEVNULL, stderr=stderr,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("broker did not come up")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def duplicates_answered(self) -> list[int]:
        """Per run: retried batches answered from the duplicate cache."""
        return [len(re.findall(rb"answered from the duplicate cache", p.read_bytes())) for p in self.runs]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _records(client: str) -> list[tuple[bytes, bytes]]:
    return [(f"{client}-k{i % 7}".encode(), f"{client}:{i}".encode()) for i in range(RECORDS_PER_CLIENT)]


def _paced(records: list[Any], stop_at: float) -> Any:
    """Yield records in small chunks spread over a few seconds so the kills land mid-stream."""
    for i, rec in enumerate(records):
        if i % 100 == 0:
            time.sleep(0.02)
        if time.monotonic() > stop_at:
            raise TimeoutError("producer ran out of time")
        yield rec


def run_confluent(bootstrap: str, topic: str, acked: list[bytes], deadline: float) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "batch.num.messages": 50, "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
                         "message.timeout.ms": 90_000, "reconnect.backoff.max.ms": 200})

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.value())

    for key, value in _paced(_records("confluent"), deadline):
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(max(deadline - time.monotonic(), 1))


def run_kafka_python(bootstrap: str, topic: str, acked: list[bytes], deadline: float) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5, batch_size=2048,
                             retries=1000, retry_backoff_ms=50, reconnect_backoff_max_ms=200,
                             delivery_timeout_ms=90_000, request_timeout_ms=5_000)
    futures = []
    for key, value in _paced(_records("kafka-python"), deadline):
        fut = producer.send(topic, key=key, value=value)
        fut.add_callback(lambda _meta, v=value: acked.append(v))
        futures.append(fut)
    producer.flush(max(deadline - time.monotonic(), 1))
    producer.close(timeout=5)


def run_aiokafka(bootstrap: str, topic: str, acked: list[bytes], deadline: float) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5,
                                    max_batch_size=2048, retry_backoff_ms=50, request_timeout_ms=5_000)
        for _ in range(200):  # the broker may be down at the moment we start
            try:
                await producer.start()
                break
            except Exception:
                await asyncio.sleep(0.1)
        try:
            pending = []
            for i, (key, value) in enumerate(_records("aiokafka")):
                if i % 100 == 0:
                    await asyncio.sleep(0.02)
                for _ in range(600):
                    try:
                        fut = await producer.send(topic, key=key, value=value)
                        break
                    except Exception:
                        await asyncio.sleep(0.1)
                else:
                    raise TimeoutError("aiokafka could not enqueue")
                fut.add_done_callback(lambda f, v=value: None if f.exception() else acked.append(v))
                pending.append(fut)
            await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True),
                                   max(deadline - time.monotonic(), 1))
        finally:
            await producer.stop()

    asyncio.run(main())


CLIENT_RUNNERS: dict[str, Callable[[str, str, list[bytes], float], None]] = {
    "confluent": run_confluent,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
}


@pytest.mark.timeout(300)
def test_sigkill_under_idempotent_load_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    broker = BrokerProcess(tmp_path / "data", _free_port())
    broker.start()
    bootstrap = f"127.0.0.1:{broker.port}"
    deadline = time.monotonic() + 150
    acked: dict[str, list[bytes]] = {name: [] for name in CLIENT_RUNNERS}
    errors: list[BaseException] = []

    def runner(name: str) -> None:
        try:
            CLIENT_RUNNERS[name](bootstrap, f"crash-{name}", acked[name], deadline)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=runner, args=(name,), daemon=True) for name in CLIENT_RUNNERS]
    try:
        for t in threads:
            t.start()
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.3, 1.0))
            broker.kill()
            time.sleep(rng.uniform(0.05, 0.5))
            broker.start()
        for t in threads:
            t.join(max(deadline - time.monotonic(), 1))
        assert not any(t.is_alive() for t in threads), "a producer did not finish in time"
        assert not errors, errors

        duplicates = broker.duplicates_answered()
        print(f"\nretries answered from the duplicate cache, per broker run: {duplicates}")
        for name in CLIENT_RUNNERS:
            topic = f"crash-{name}"
            got: list[Rec] = confluent_consume(bootstrap, topic, PARTITIONS, len(acked[name]), timeout=60)
            values = [r.value for r in got]
            assert len(values) == len(set(values)), f"{name}: duplicates in the log"
            missing = set(acked[name]) - set(values)
            assert not missing, f"{name}: {len(missing)} acknowledged records lost"
            for part in range(PARTITIONS):
                seqs = [int(r.value.split(b":")[1]) for r in sorted(got, key=lambda r: r.offset)
                        if r.partition == part]
                assert seqs == sorted(seqs), f"{name}: partition {part} out of order"
            print(f"{name}: {len(acked[name])} acknowledged, {len(values)} in the log")
        assert len(broker.runs) == KILLS + 1
    finally:
        broker.stop()
