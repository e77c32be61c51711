"""pytest fixtures that give each test (or the session) a real minikafka broker.

Installed with minikafka (entry point ``pytest11``), so a test only names a fixture::

    def test_orders_are_not_duplicated(minikafka):
        topic = minikafka.new_topic(partitions=3)
        rule = minikafka.faults.drop_response(api="Produce", topic=topic)
        run_my_producer(minikafka.bootstrap, topic)
        assert rule.fired == 1
        assert len(minikafka.records(topic, 0)) == expected

Fixtures:

``minikafka``
    a broker for one test, on a free port over a fresh temporary data dir.
``minikafka_session``
    one broker shared by the whole session (use :meth:`MiniKafka.new_topic` for unique topics;
    its fault rules are cleared after each test that used it).
``minikafka_factory``
    a function that starts brokers with given options; all stop at the end of the test.
``minikafka_cluster``
    a cluster of brokers (3 by default) for one test, a
    :class:`~minikafka.testkit.in_process_cluster.MiniKafkaCluster` with its failover controls;
    settings from ``@pytest.mark.minikafka_cluster(brokers=3, config={...}, faults=[...], admin_port=0)``.

Data dirs are fresh temporary directories on a RAM filesystem (``/dev/shm``) when one with
room is there — a first start's fsyncs are most of a broker's start-up time on a disk — and are
removed when the broker stops. ``minikafka_data_in_memory = false`` in the pytest ini file puts
them under pytest's ``tmp_path`` instead (kept for inspection, as pytest keeps those).

Settings for ``minikafka`` come from ``@pytest.mark.minikafka(config={...}, faults=[...],
admin_port=0)``. The broker runs on a thread of its own, so sync and asyncio tests alike can
use any client library against ``minikafka.bootstrap``.
"""

from __future__ import annotations

import functools
import importlib
import shutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from minikafka.testkit import MiniKafka, MiniKafkaCluster

_MARKER = "minikafka"
_CLUSTER_MARKER = "minikafka_cluster"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "minikafka_data_in_memory",
        "put the minikafka fixtures' data dirs on a RAM filesystem (/dev/shm) when one with room is there "
        "(default true); false keeps them under pytest's tmp_path",
        type="bool",
        default=True,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(config=None, faults=None, admin_port=None): settings for the minikafka fixture's broker "
        "(Kafka broker settings, fault rule specs, admin HTTP port)",
    )
    config.addinivalue_line(
        "markers",
        f"{_CLUSTER_MARKER}(brokers=3, config=None, faults=None, admin_port=None): settings for the minikafka_cluster "
        "fixture's cluster (number of brokers, Kafka broker settings, fault rule specs, admin HTTP port)",
    )


@functools.cache
def _load_broker_code() -> None:
    """Import everything the broker will load, now, on the test's own thread.

    The broker loads codec and handler modules on the first request of each API, on its own
    thread, in the middle of the user's test. minikafka loads kafka-python's modules inside
    :func:`~minikafka._kafka_codec.quiet_kafka_imports` (which hides the deprecation warnings
    kafka-python emits while loading) wherever that happens; but that scope swaps the process's
    warning filters, which pytest also sets around each test. Loading everything here keeps
    that swap off the broker's thread during a test.
    """
    from minikafka._kafka_codec import load_quietly
    from minikafka.broker.dispatch import build_api_table

    for spec in build_api_table().values():
        spec.request, spec.response, spec.handler  # noqa: B018 - loads them (through load_quietly)
    load_quietly("kafka.record", "MemoryRecords")
    load_quietly("kafka", "codec")
    importlib.import_module("minikafka.testkit.in_process")


def _start(pytest_config: pytest.Config, tmp_path_factory: pytest.TempPathFactory, name: str,
           **options: Any) -> MiniKafka:
    _load_broker_code()  # imported when a fixture is used, not at pytest start-up
    from minikafka.testkit import MiniKafka

    return _started(MiniKafka, pytest_config, tmp_path_factory, name, options)


def _started(kind: Callable[..., Any], pytest_config: pytest.Config, tmp_path_factory: pytest.TempPathFactory,
             name: str, options: dict[str, Any]) -> Any:
    """``kind(**options).start()`` over a fresh data dir (in RAM unless the ini file says not)."""
    made_dir = None
    if "data_dir" not in options:
        if pytest_config.getini("minikafka_data_in_memory"):
            options["in_memory"] = True  # a fresh dir in RAM, removed when the broker stops
        else:
            options["data_dir"] = made_dir = tmp_path_factory.mktemp(name)
    try:
        return kind(**options).start()
    except BaseException:
        if made_dir is not None:  # refused (a bad setting, a port in use): nothing to inspect there
            shutil.rmtree(made_dir, ignore_errors=True)
        raise


@pytest.fixture
def minikafka_factory(pytestconfig: pytest.Config,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., MiniKafka]]:
    """Start brokers: ``minikafka_factory(config={...}, faults=[...], admin_port=0, port=0, data_dir=...)``."""
    started: list[MiniKafka] = []

    def start(**options: Any) -> MiniKafka:
        broker = _start(pytestconfig, tmp_path_factory, "minikafka", **options)
        started.append(broker)
        return broker

    yield start
    for broker in reversed(started):
        broker.stop()


@pytest.fixture
def minikafka(request: pytest.FixtureRequest, minikafka_factory: Callable[..., MiniKafka]) -> MiniKafka:
    """A broker for this test on a free 127.0.0.1 port, with a temporary data dir."""
    return minikafka_factory(**_marked(request, _MARKER))


def _marked(request: pytest.FixtureRequest, name: str) -> dict[str, Any]:
    """The keyword arguments of the test's ``name`` markers; the closest marker wins."""
    options: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(name))):
        options.update(marker.kwargs)
    return options


@pytest.fixture
def minikafka_cluster(request: pytest.FixtureRequest, pytestconfig: pytest.Config,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniKafkaCluster]:
    """A cluster for this test (3 brokers unless the marker says), on free ports, with a temporary data dir."""
    _load_broker_code()
    from minikafka.testkit import MiniKafkaCluster

    cluster = _started(MiniKafkaCluster, pytestconfig, tmp_path_factory, "minikafka-cluster",
                       _marked(request, _CLUSTER_MARKER))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def _minikafka_session_broker(pytestconfig: pytest.Config,
                              tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniKafka]:
    broker = _start(pytestconfig, tmp_path_factory, "minikafka-session")
    yield broker
    broker.stop()


@pytest.fixture
def minikafka_session(_minikafka_session_broker: MiniKafka) -> Iterator[MiniKafka]:
    """The session's shared broker; fault rules a test adds are removed when it ends."""
    yield _minikafka_session_broker
    if _minikafka_session_broker.running:
        _minikafka_session_broker.faults.clear()
    else:  # a test crashed it: bring it back for the next one
        _minikafka_session_broker.start_again()
