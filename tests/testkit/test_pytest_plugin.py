"""The pytest plugin, as a user's test suite sees it: fixtures found through the ``pytest11``
entry point (nothing imported by hand), sync and asyncio tests, markers, factory and session
scope. Each case runs a separate pytest process on a generated test file (pytester)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from tests.doc_blocks import ROOT

pytest_plugins = ["pytester"]


def test_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("minikafka") == "minikafka.pytest_plugin"


def test_fixtures_serve_sync_and_async_clients_and_apply_markers(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_user="""
        import asyncio
        import pytest
        from confluent_kafka import Producer


        def test_sync_client(minikafka):
            topic = minikafka.new_topic(partitions=2)
            producer = Producer({"bootstrap.servers": minikafka.bootstrap})
            producer.produce(topic, value=b"hello", partition=1)
            assert producer.flush(10) == 0
            assert [r.value for r in minikafka.records(topic, 1)] == [b"hello"]
            assert minikafka.data_dir.exists()


        async def test_async_client(minikafka):
            from aiokafka import AIOKafkaProducer

            producer = AIOKafkaProducer(bootstrap_servers=minikafka.bootstrap, enable_idempotence=True)
            await producer.start()
            try:
                await asyncio.wait_for(producer.send_and_wait("async-topic", b"x"), 10)
            finally:
                await producer.stop()
            assert [r.value for r in minikafka.records("async-topic")] == [b"x"]


        @pytest.mark.minikafka(config={"num.partitions": 3},
                               faults=[{"action": "error_before", "api": "Produce", "trigger": "next", "n": 2}])
        def test_marker_settings_and_faults(minikafka):
            producer = Producer({"bootstrap.servers": minikafka.bootstrap, "retry.backoff.ms": 10})
            producer.produce("auto", value=b"v", partition=2)
            assert producer.flush(10) == 0
            assert minikafka.topics() == {"auto": 3}
            assert [r.fired for r in minikafka.faults.rules] == [2]


        def test_each_test_gets_its_own_broker(minikafka):
            assert minikafka.topics() == {}


        def test_factory_starts_several(minikafka_factory):
            one = minikafka_factory()
            two = minikafka_factory(admin_port=0)
            assert one.bootstrap != two.bootstrap
            assert one.admin_url is None and two.admin_url.startswith("http://127.0.0.1:")


        def test_session_broker_first(minikafka_session):
            minikafka_session.create_topic("shared")
            minikafka_session.faults.close_connection(api="Produce", trigger="always")
            pytest.shared_bootstrap = minikafka_session.bootstrap


        def test_session_broker_second(minikafka_session):
            assert minikafka_session.bootstrap == pytest.shared_bootstrap
            assert "shared" in minikafka_session.topics()
            assert minikafka_session.faults.rules == []  # the previous test's rules are gone
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error",
                                           "-W", "ignore:read_text is deprecated:DeprecationWarning",
                                           "-W", "ignore:open_text is deprecated:DeprecationWarning")
    result.assert_outcomes(passed=7)


def test_a_crashed_session_broker_is_back_for_the_next_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_crash="""
        def test_crash_it(minikafka_session):
            minikafka_session.create_topic("survives")
            minikafka_session.crash()
            assert not minikafka_session.running


        def test_it_is_back(minikafka_session):
            assert minikafka_session.running
            assert "survives" in minikafka_session.topics()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_broker_that_cannot_start_fails_at_once_and_leaves_no_data_dir(minikafka_factory: Any) -> None:
    from minikafka.testkit import MiniKafka

    taken = minikafka_factory()
    kafka = MiniKafka(port=taken.port)
    started = time.monotonic()
    with pytest.raises(OSError):
        kafka.start()
    assert time.monotonic() - started < 10
    assert not kafka.data_dir.exists()


def test_fixtures_leak_no_third_party_warnings_into_a_strict_run(pytester: pytest.Pytester) -> None:
    # a user's project with `filterwarnings = error` and no pytest-asyncio: every API the broker
    # serves is used at least once (each loads its codec on its first request); minikafka is
    # imported at the top too, so at collection, where the filters apply as well
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n")
    pytester.makepyfile(
        test_strict="""
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        from minikafka.broker.embedded import BrokerThread
        from minikafka.testkit import MiniKafka


        def test_produce_consume_and_admin(minikafka):
            assert isinstance(minikafka, MiniKafka) and BrokerThread
            admin = AdminClient({"bootstrap.servers": minikafka.bootstrap})
            admin.create_topics([NewTopic("made", 2)])["made"].result(10)
            producer = Producer({"bootstrap.servers": minikafka.bootstrap, "enable.idempotence": True})
            producer.produce("made", value=b"v", partition=1)
            assert producer.flush(10) == 0
            consumer = Consumer({"bootstrap.servers": minikafka.bootstrap, "group.id": "g",
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe(["made"])
            msg = None
            for _ in range(40):
                msg = consumer.poll(0.5)
                if msg is not None:
                    break
            consumer.close()
            assert msg is not None and msg.value() == b"v"
            assert [r.value for r in minikafka.records("made", 1)] == [b"v"]
            minikafka.roll_segment("made")
            minikafka.restart(clean=False)
            assert "minikafka_up 1" in minikafka.metrics()


        def test_session_and_factory(minikafka_session, minikafka_factory):
            minikafka_session.new_topic()
            assert minikafka_factory(admin_port=0).admin_url
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:asyncio", "-W", "error")
    result.assert_outcomes(passed=2)
    assert "warnings summary" not in result.stdout.str()


def test_async_tests_work_with_the_documented_pytest_asyncio_setup(pytester: pytest.Pytester) -> None:
    # docs/integration-testing.md: pip install pytest-asyncio, and these two ini lines
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
                     "filterwarnings =\n    error\n")
    pytester.makepyfile(
        test_async="""
        async def test_async_client(minikafka):
            from aiokafka import AIOKafkaProducer

            producer = AIOKafkaProducer(bootstrap_servers=minikafka.bootstrap, enable_idempotence=True)
            await producer.start()
            try:
                await producer.send_and_wait("events", b"x")
            finally:
                await producer.stop()
            assert [r.value for r in minikafka.records("events")] == [b"x"]
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=1)


# ----------------------------------------------------------------------------- refused starts
#: run in a child: lists the scratch roots (RAM and disk), runs the command after ``--``, lists
#: them again; the child has a private /dev/shm (a fresh tmpfs) when it may mount one, and a
#: private TMPDIR, so other processes' brokers on this machine do not change the counts
_COUNT_SCRATCH_ENTRIES = """
import json, os, subprocess, sys, tempfile
roots = ["/dev/shm", tempfile.gettempdir()]
before = {root: sorted(os.listdir(root)) for root in roots}
run = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=300)
after = {root: sorted(os.listdir(root)) for root in roots}
print(json.dumps({"before": before, "after": after, "rc": run.returncode, "out": run.stdout + run.stderr}))
"""


def _private_shm_prefix() -> list[str]:
    """``unshare`` into a mount namespace with a tmpfs on /dev/shm, if this user may; else nothing
    (the counts then cover the private TMPDIR, and /dev/shm as other processes leave it)."""
    probe = ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=2g minikafka-test /dev/shm"]
    try:
        if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
            return ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=2g minikafka-test /dev/shm && exec "$@"',
                    "sh"]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return []


def run_counting_scratch_entries(command: list[str], tmp_path: Path) -> dict[str, Any]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_")}
    env.update(TMPDIR=str(tmpdir), PYTHONPATH=str(ROOT))
    shm = _private_shm_prefix()
    result = subprocess.run([*shm, sys.executable, "-c", _COUNT_SCRATCH_ENTRIES, *command], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    counts: dict[str, Any] = json.loads(result.stdout)
    counts["private_shm"] = bool(shm)
    return counts


def assert_nothing_left(counts: dict[str, Any]) -> None:
    """The private roots hold what they held before (/dev/shm only when it was private)."""
    roots = [root for root in counts["before"] if root != "/dev/shm" or counts["private_shm"]]
    for root in roots:
        assert counts["after"][root] == counts["before"][root], (root, counts)


@pytest.mark.parametrize("in_memory", ["true", "false"])
def test_a_refused_marker_setting_fails_the_test_and_leaves_no_directory(tmp_path: Path, in_memory: str) -> None:
    (tmp_path / "pytest.ini").write_text(f"[pytest]\nminikafka_data_in_memory = {in_memory}\n")
    (tmp_path / "test_user.py").write_text(
        "import pytest\n\n\n"
        "@pytest.mark.minikafka(config={'num.partition': 3})\n"
        "def test_typo(minikafka):\n"
        "    pass\n"
    )
    basetemp = tmp_path / "basetemp"
    counts = run_counting_scratch_entries([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                           f"--basetemp={basetemp}", "test_user.py"], tmp_path)
    assert counts["rc"] == 1, counts["out"]
    assert "num.partition=3: unknown broker setting; did you mean num.partitions?" in counts["out"]
    assert "1 error" in counts["out"]
    assert_nothing_left(counts)
    left = [p.name for p in basetemp.rglob("*") if p.name.startswith("minikafka")]
    assert left == [], left  # with minikafka_data_in_memory = false the dir would be under basetemp


@pytest.mark.parametrize("in_memory", [True, False])
def test_minikafka_refused_at_construction_or_start_leaves_no_scratch_dir(tmp_path: Path, in_memory: bool) -> None:
    code = f"""
import socket
from minikafka.startup_errors import BindError, ConfigError
from minikafka.testkit import MiniKafka

try:
    MiniKafka(config={{"num.partition": 3}}, in_memory={in_memory})
except ConfigError as exc:
    print("refused:", exc)
with socket.socket() as taken:
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        MiniKafka(port=taken.getsockname()[1], in_memory={in_memory}).start()
    except BindError as exc:
        print("refused:", exc)
"""
    counts = run_counting_scratch_entries([sys.executable, "-c", code], tmp_path)
    assert counts["rc"] == 0, counts["out"]
    assert counts["out"].count("refused:") == 2, counts["out"]
    assert_nothing_left(counts)
