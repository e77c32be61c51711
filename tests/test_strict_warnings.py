"""minikafka in a process that turns warnings into errors (``python -W error``, pytest's
``filterwarnings = error``): its own imports of kafka-python emit none, through every entry point
a user has (the README's ``BrokerThread``, ``MiniKafka``, the fixtures: tests/testkit/test_pytest_plugin.py
runs a strict suite too). Each case is a separate Python or pytest process, as a user's would be."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_blocks import ROOT, the_block

pytest_plugins = ["pytester"]

#: produce and consume with confluent-kafka (which warns about nothing): the broker loads the
#: kafka-python classes of Metadata, CreateTopics, InitProducerId, Produce, FindCoordinator,
#: the group APIs, OffsetFetch, ListOffsets and Fetch on their first requests
ROUND_TRIP = """
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

def round_trip(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("strict", 1)])["strict"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce("strict", key=b"k", value=b"v")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    consumer.subscribe(["strict"])
    seen = []
    while (msg := consumer.poll(10)) is not None and not msg.error():  # until the end of the partition
        seen.append((msg.key(), msg.value()))
    consumer.close()
    assert seen == [(b"k", b"v")], seen
    print("consumed", seen)
"""


def run_strict(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MINIKAFKA_", "PYTHONWARNINGS"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_readme_broker_thread_example_runs_under_w_error(tmp_path: Path) -> None:
    example = the_block(ROOT / "README.md", "run", "BrokerThread").text
    example = example.replace('"/tmp/mk"', repr(str(tmp_path / "data")))
    assert str(tmp_path) in example  # the example's data dir is the one replaced
    body = example.replace("    print(broker.bootstrap)", "    print(broker.bootstrap)\n    round_trip(broker.bootstrap)")
    result = run_strict(ROUND_TRIP + body, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "consumed [(b'k', b'v')]" in result.stdout
    assert "Warning" not in result.stderr, result.stderr[-3000:]


def test_minikafka_runs_under_w_error(tmp_path: Path) -> None:
    code = ROUND_TRIP + """
from minikafka.testkit import MiniKafka

with MiniKafka() as kafka:
    round_trip(kafka.bootstrap)
    assert [r.value for r in kafka.records("strict")] == [b"v"]
    kafka.roll_segment("strict")
    kafka.restart(clean=False)
    assert "minikafka_up 1" in kafka.metrics()
"""
    result = run_strict(code, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "consumed [(b'k', b'v')]" in result.stdout
    assert "Warning" not in result.stderr, result.stderr[-3000:]


def test_a_suite_that_imports_kafka_python_passes_with_the_documented_filters(pytester: pytest.Pytester) -> None:
    # docs/integration-testing.md, "Warnings": the ini file for a user's own `from kafka import ...`
    ini = the_block(ROOT / "docs" / "integration-testing.md", "data", "read_text is deprecated").text
    assert "    error\n" in ini
    pytester.makeini(ini)
    pytester.makepyfile(test_user="""
from kafka import KafkaConsumer, KafkaProducer


def test_kafka_python_client(minikafka):
    producer = KafkaProducer(bootstrap_servers=minikafka.bootstrap, enable_idempotence=True)
    producer.send("kp", key=b"k", value=b"hello").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("kp", bootstrap_servers=minikafka.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    values = [next(consumer).value]  # StopIteration if nothing comes within 10 s
    consumer.close()
    assert values == [b"hello"]
    assert [r.value for r in minikafka.records("kp")] == [b"hello"]
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:asyncio")
    result.assert_outcomes(passed=1)
