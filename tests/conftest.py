"""Shared fixtures: a real broker on a free 127.0.0.1 port over a temporary data dir."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from minikafka.broker.embedded import BrokerThread
from tests.producer_state_helpers import Clock


@pytest.fixture
def start_broker(tmp_path: Any) -> Iterator[Callable[..., BrokerThread]]:
    """Start brokers with given settings; all are stopped at the end of the test."""
    started: list[BrokerThread] = []

    def start(config: dict[str, Any] | None = None, data_dir: Any = None, **kwargs: Any) -> BrokerThread:
        directory = data_dir if data_dir is not None else tmp_path / f"data-{len(started)}"
        broker = BrokerThread(data_dir=str(directory), port=0, config=config, **kwargs).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def broker(start_broker: Callable[..., BrokerThread]) -> BrokerThread:
    return start_broker()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def clock() -> Clock:
    """A broker clock the test moves by hand, for code that takes ``now_ms``."""
    return Clock()
