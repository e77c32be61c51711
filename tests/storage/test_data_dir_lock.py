"""One broker per data directory: a second broker on a data dir in use is refused and touches nothing.

Two brokers sharing a data dir remove each other's partitions as stale and overwrite each other's
checkpoints, so acknowledged records are lost; minikafka holds ``<data-dir>/.lock`` as Kafka does.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
from pathlib import Path

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.config import BrokerConfig
from minikafka.startup_errors import DataDirError
from minikafka.storage.log_manager import LogManager
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, fetch_raw, produce
from tests.storage_helpers import kafka_batches
from tests.test_cli import MINIKAFKA, cli_env, one_line, start_serve, stop_serve


def dir_state(data_dir: Path) -> dict[str, tuple[int, str]]:
    """Every file under the data dir with its modification time and a hash of its bytes."""
    return {str(p.relative_to(data_dir)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(data_dir.rglob("*")) if p.is_file()}


def produce_values(client: RawClient, topic: str, values: list[bytes]) -> None:
    assert produce(client, topic, build_batch(values=values)).error_code == 0


def fetch_all_values(client: RawClient, topic: str) -> list[bytes]:
    records = fetch_raw(client, topic).records or b""
    return [record.value for batch in kafka_batches(records) for record in batch]


def test_a_second_log_manager_is_refused_until_the_first_lets_go(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = LogManager(data, BrokerConfig(data_dir=str(data)))
    first.load()
    first.create_topic("t", 2, {})
    before = dir_state(data)
    second = LogManager(data, BrokerConfig(data_dir=str(data)))
    with pytest.raises(DataDirError, match=rf"data dir {data} is in use by another broker \(this process"):
        second.load()
    assert dir_state(data) == before
    first.shutdown()
    second.load()  # the clean shutdown let go of the lock
    assert second.get_log("t", 1) is not None
    second.abandon()  # so does a crash
    third = LogManager(data, BrokerConfig(data_dir=str(data)))
    third.load()
    third.shutdown()


def test_a_second_embedded_broker_on_the_same_dir_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with BrokerThread(data_dir=str(data)) as first:
        with RawClient(first.bootstrap) as client:
            create_topic(client, "kept", 1)
            produce_values(client, "kept", [b"a", b"b"])
        second = BrokerThread(data_dir=str(data))
        with pytest.raises(DataDirError, match="is in use by another broker"):
            second.start()
        with RawClient(first.bootstrap) as client:  # the first broker goes on unharmed
            assert fetch_all_values(client, "kept") == [b"a", b"b"]
    with BrokerThread(data_dir=str(data)) as again, RawClient(again.bootstrap) as client:
        assert fetch_all_values(client, "kept") == [b"a", b"b"]


def test_serve_on_a_data_dir_in_use_exits_with_one_line_and_loses_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_serve(tmp_path)
    try:
        with RawClient(f"127.0.0.1:{first.port}") as client:
            create_topic(client, "orders", 1)
            produce_values(client, "orders", [b"acknowledged-1", b"acknowledged-2"])
        before = dir_state(data)
        second = subprocess.run([str(MINIKAFKA), "serve", "--port", "0", "--data-dir", str(data)],
                                capture_output=True, text=True, timeout=60, env=cli_env())
        line = one_line(second)
        assert second.returncode == 4
        assert f"--data-dir {data} is in use by another broker (process {first.process.pid} holds" in line
        assert dir_state(data) == before
        with RawClient(f"127.0.0.1:{first.port}") as client:
            produce_values(client, "orders", [b"acknowledged-3"])
    finally:
        stop_serve(first)
    again = start_serve(tmp_path)
    try:
        with RawClient(f"127.0.0.1:{again.port}") as client:
            assert fetch_all_values(client, "orders") == [b"acknowledged-1", b"acknowledged-2", b"acknowledged-3"]
    finally:
        stop_serve(again)


def test_the_lock_of_a_killed_broker_goes_with_its_process(tmp_path: Path) -> None:
    first = start_serve(tmp_path)
    first.process.send_signal(signal.SIGKILL)
    first.process.communicate(timeout=30)
    again = start_serve(tmp_path)
    stop_serve(again)
