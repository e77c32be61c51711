"""What keeps ``minikafka serve`` quick to start: kafka-python's client and crc32c's metadata
lookup stay unloaded until something asks for them, and asking still works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from minikafka.testkit import MiniKafka


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", textwrap.dedent(code)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_broker_loads_without_kafka_pythons_client_or_package_metadata() -> None:
    out = run_python("""
        import sys
        from minikafka import _kafka_codec
        _kafka_codec.defer_codec_packages()
        import minikafka.broker.server, minikafka.broker.embedded, minikafka.testkit.control
        heavy = [m for m in ("kafka.producer", "kafka.consumer", "kafka.admin", "kafka.net",
                             "kafka.protocol.admin.acl", "importlib.metadata", "crc32c._cli") if m in sys.modules]
        print(heavy)
    """)
    assert out.strip() == "[]"


def test_deferred_packages_still_work_in_full_in_the_same_process() -> None:
    out = run_python("""
        from minikafka import _kafka_codec
        _kafka_codec.defer_codec_packages()
        import minikafka.broker.server
        from crc32c import crc32c
        assert crc32c(b"123456789") == 0xE3069283
        from kafka.protocol.admin import DescribeAclsRequest, CreateTopicsRequest
        assert DescribeAclsRequest.API_KEY == 29 and CreateTopicsRequest.API_KEY == 19
        from kafka import KafkaProducer, TopicPartition
        import kafka, crc32c as package
        assert kafka.__version__ and package.__version__
        assert "KafkaConsumer" in dir(kafka)
        print(type(kafka).__name__, KafkaProducer.__name__, TopicPartition("t", 0).partition)
    """)
    assert out.split() == ["module", "KafkaProducer", "0"]


def imported_by_serve(tmp_path: Path, eager: bool, *options: str) -> set[str]:
    """Modules `minikafka serve` imported by the time it answered Metadata (PYTHONPROFILEIMPORTTIME)."""
    from bench.startup import free_port, wait_for_metadata

    port = free_port()
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "MINIKAFKA_EAGER_IMPORTS": "1" if eager else "0"}
    process = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", str(port), "--data-dir",
                                str(tmp_path / ("eager" if eager else "deferred")), "--log-level", "WARNING",
                                *options],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for_metadata(port, timeout=60)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_serve_defers_kafka_pythons_client_and_the_escape_hatch_turns_that_off(tmp_path: Path) -> None:
    deferred = imported_by_serve(tmp_path, eager=False)
    assert "kafka.protocol.metadata.metadata" in deferred  # loaded for the Metadata request it answered
    assert not {"kafka.producer", "kafka.consumer", "kafka.admin", "importlib.metadata"} & deferred
    eager = imported_by_serve(tmp_path, eager=True)
    assert {"kafka.producer", "kafka.consumer", "kafka.admin"} <= eager


def test_serve_imports_the_http_library_only_with_an_admin_port(tmp_path: Path) -> None:
    plain = imported_by_serve(tmp_path / "plain", False)
    assert not {m for m in plain if m == "aiohttp" or m.startswith(("aiohttp.", "minikafka.testkit"))}
    with_admin = imported_by_serve(tmp_path / "admin", False, "--admin-port", "0")
    assert {"aiohttp.web", "minikafka.testkit.admin_http"} <= with_admin


def test_in_process_broker_answers_metadata_right_after_start() -> None:
    from bench.startup import wait_for_metadata

    with MiniKafka() as kafka:
        wait_for_metadata(kafka.port, timeout=5)
