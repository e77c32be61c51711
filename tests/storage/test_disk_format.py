"""The on-disk format rules shared by the broker's storage and the Spark reader.

A user topic whose name starts with ``__`` is an ordinary topic for the broker; the reader plans it
like any other and leaves out only the broker's own internal topics.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from minikafka.broker.embedded import BrokerThread
from minikafka.spark_export.files import LocalFiles
from minikafka.spark_export.layout import read_offset_checkpoint
from minikafka.spark_export.options import parse_options
from minikafka.spark_export.planner import plan
from minikafka.storage import checkpoints
from minikafka.storage.disk_format import is_internal_topic, parse_partition_dir_name
from tests.kafka_wire import RawClient, build_batch
from tests.scenario_helpers import create_topic, produce


def test_a_user_topic_starting_with_two_underscores_is_served_and_planned_for_export(
    start_broker: Callable[..., BrokerThread], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    broker = start_broker(data_dir=data_dir)
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "__foo")
        create_topic(c, "orders")
        assert produce(c, "__foo", build_batch(values=[b"a", b"b"])).error_code == 0
        assert produce(c, "orders", build_batch(values=[b"c"])).error_code == 0
    assert not is_internal_topic("__foo") and is_internal_topic("__consumer_offsets")
    planned = {s.topic for s in plan(parse_options({"path": str(data_dir)}))}
    assert planned == {"__foo", "orders"}
    subscribed = {s.topic for s in plan(parse_options({"path": str(data_dir), "subscribe": "__foo"}))}
    assert subscribed == {"__foo"}


@pytest.mark.parametrize("text", ["0\n2\nt 0 5\n", "1\n1\nt 0 5\n", "0\nx\n", "0\n1\nt zero 5\n", ""])
def test_storage_and_the_reader_agree_on_malformed_checkpoints(tmp_path: Path, text: str) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(text)
    assert checkpoints.read_offset_checkpoint(path) == read_offset_checkpoint(LocalFiles(str(tmp_path)), str(path)) == {}


def test_storage_and_the_reader_read_the_same_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    checkpoints.write_offset_checkpoint(path, {("__foo", 0): 7, ("a.b", 12): 3})
    assert checkpoints.read_offset_checkpoint(path) == read_offset_checkpoint(LocalFiles(str(tmp_path)), str(path)) == {
        ("__foo", 0): 7, ("a.b", 12): 3}


@pytest.mark.parametrize(("name", "parsed"), [
    ("orders-3", ("orders", 3)), ("__foo-0", ("__foo", 0)), ("a-b-12", ("a-b", 12)),
    ("..-0", None), ("orders", None), ("orders-3.0123456789abcdef0123456789abcdef-delete", None),
])
def test_partition_directory_names(name: str, parsed: tuple[str, int] | None) -> None:
    assert parse_partition_dir_name(name) == parsed
