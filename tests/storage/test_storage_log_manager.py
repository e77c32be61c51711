"""LogManager: data-dir identity, catalogue, checkpoints and the clean-shutdown marker (docs/semantics.md#clean-shutdown, docs/semantics.md#metadata-files)."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from pathlib import Path

import pytest

from minikafka.config import BrokerConfig
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage import checkpoints as ckpt
from minikafka.storage.log_manager import LogManager
from tests.storage_helpers import TS, crash, make_batch

P = 1000


def _manager(data_dir: Path, node_id: int = 1, **settings: object) -> LogManager:
    manager = LogManager(data_dir, BrokerConfig(data_dir=str(data_dir), node_id=node_id, settings=dict(settings)),
                         now_ms=lambda: TS)
    manager.load()
    return manager


def _checkpoint_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_meta_properties_is_version_1_with_a_22_char_cluster_id_that_survives_restarts(tmp_path: Path) -> None:
    manager = _manager(tmp_path / "data", node_id=7)
    manager.shutdown()
    props = ckpt.read_properties(tmp_path / "data" / "meta.properties")
    assert props["version"] == "1" and props["node.id"] == "7"
    assert len(props["cluster.id"]) == 22 and "=" not in props["cluster.id"]
    assert len(base64.urlsafe_b64decode(props["cluster.id"] + "==")) == 16
    assert _manager(tmp_path / "data", node_id=7).cluster_id == props["cluster.id"] == manager.cluster_id


def test_a_data_dir_of_another_node_id_is_refused(tmp_path: Path) -> None:
    _manager(tmp_path / "data", node_id=1).shutdown()
    with pytest.raises(RuntimeError, match="node.id"):
        _manager(tmp_path / "data", node_id=2)


def test_clean_marker_is_written_at_shutdown_and_deleted_at_load(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    assert not manager.clean_start
    manager.create_topic("a", 1, {})
    manager.shutdown()
    assert json.loads((data / ".kafka_cleanshutdown").read_text())["version"] == 0
    manager = _manager(data)
    assert manager.clean_start
    assert not (data / ".kafka_cleanshutdown").exists()
    manager.abandon()
    assert not _manager(data).clean_start
    assert not (data / ".kafka_cleanshutdown").exists()


def test_checkpoint_files_use_kafkas_text_format(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    manager.create_topic("orders", 2, {})
    manager.create_topic("x.y", 1, {})
    for seq in range(5):
        manager.get_log("orders", 1).append_from_client(make_batch(P, 0, seq))
    manager.get_log("orders", 1).flush()
    manager.get_log("orders", 1).delete_records(3)
    manager.checkpoint()
    assert _checkpoint_lines(data / "recovery-point-offset-checkpoint") == [
        "0", "3", "orders 0 0", "orders 1 5", "x.y 0 0"]
    # only partitions whose log start is above their first segment's base are listed
    assert _checkpoint_lines(data / "log-start-offset-checkpoint") == ["0", "1", "orders 1 3"]


def test_malformed_checkpoint_files_read_as_empty(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n2\nt 0 5\n")  # count says 2, one entry
    assert ckpt.read_offset_checkpoint(path) == {}
    path.write_text("1\n0\n")
    assert ckpt.read_offset_checkpoint(path) == {}
    path.write_text("0\n1\nt 0 x\n")
    assert ckpt.read_offset_checkpoint(path) == {}
    assert ckpt.read_offset_checkpoint(tmp_path / "missing") == {}
    path.write_text("0\n2\nt 0 5\nu-v 3 9\n")
    assert ckpt.read_offset_checkpoint(path) == {("t", 0): 5, ("u-v", 3): 9}
    assert "malformed checkpoint" in caplog.text


def test_partition_metadata_holds_the_catalogue_topic_id_in_kafkas_format(tmp_path: Path) -> None:
    data = tmp_path / "data"
    info = _manager(data).create_topic("orders", 2, {})
    for partition in range(2):
        text = (data / f"orders-{partition}" / "partition.metadata").read_text()
        version, topic_id = text.split("\n")
        assert version == "version: 0"
        assert topic_id == "topic_id: " + base64.urlsafe_b64encode(info.topic_id.bytes).decode().rstrip("=")


def test_topics_with_ids_partitions_and_overrides_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    a = manager.create_topic("a", 3, {"retention.ms": "1000", "max.message.bytes": "200"})
    b = manager.create_topic("b", 1, {})
    manager.get_log("a", 2).append_from_client(make_batch(count=4))
    manager.shutdown()
    manager = _manager(data)
    assert manager.topics() == {"a": a, "b": b}
    assert manager.get_log("a", 2).log_end_offset == 4
    assert manager.get_log("a", 0).config["max.message.bytes"] == 200
    with pytest.raises(KafkaError) as info:
        manager.get_log("a", 0).append_from_client(make_batch(value=b"x" * 300))
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_after_an_unclean_shutdown_recovery_starts_at_the_checkpointed_recovery_point(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    manager.create_topic("a", 1, {})
    plog = manager.get_log("a", 0)
    for seq in range(10):
        plog.append_from_client(make_batch(P, 0, seq))
    plog.roll()
    plog.flush()
    for seq in range(10, 15):
        plog.append_from_client(make_batch(P, 0, seq))
    manager.checkpoint()
    crash(plog)
    manager.unlock()  # the killed process's lock on the data dir goes with it
    with open(data / "a-0" / "00000000000000000010.log", "ab") as f:
        f.write(b"\x00\x00\x00")
    with caplog.at_level(logging.INFO):
        manager = _manager(data)
    assert not manager.clean_start
    assert manager.get_log("a", 0).log_end_offset == 15
    assert "re-validating 1 segment(s) from offset 10" in caplog.text
    assert manager.get_log("a", 0).append_from_client(make_batch(P, 0, 14)).duplicate


def test_delete_topic_removes_its_directories_for_good(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    manager.create_topic("gone", 2, {})
    manager.create_topic("kept", 1, {})
    manager.get_log("gone", 0).append_from_client(make_batch())
    manager.delete_topic("gone")
    assert manager.get_log("gone", 0) is None
    assert not any(p.name.startswith("gone") for p in data.iterdir())
    with pytest.raises(KafkaError) as info:
        manager.delete_topic("gone")
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    manager.shutdown()
    assert set(_manager(data).topics()) == {"kept"}
    recreated = _manager(data).create_topic("gone", 1, {})
    assert recreated.partitions == 1


def test_recreating_a_deleted_topic_starts_empty_with_a_new_id(tmp_path: Path) -> None:
    manager = _manager(tmp_path / "data")
    first = manager.create_topic("t", 1, {})
    manager.get_log("t", 0).append_from_client(make_batch(count=3))
    manager.delete_topic("t")
    second = manager.create_topic("t", 1, {})
    assert second.topic_id != first.topic_id
    assert manager.get_log("t", 0).log_end_offset == 0


def test_add_partitions_creates_the_new_ones_and_persists_the_count(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    manager.create_topic("t", 1, {})
    manager.add_partitions("t", 3)
    assert manager.get_log("t", 2) is not None
    with pytest.raises(KafkaError) as info:
        manager.add_partitions("t", 2)
    assert info.value.code == ErrorCode.INVALID_PARTITIONS
    manager.shutdown()
    assert _manager(data).topics()["t"].partitions == 3


def test_alter_configs_replaces_or_merges_overrides_and_reaches_the_logs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    manager.create_topic("t", 1, {"retention.ms": "5", "segment.ms": "99999"})
    manager.alter_topic_configs("t", {"max.message.bytes": "150"})
    assert manager.topics()["t"].configs == {"max.message.bytes": "150"}
    with pytest.raises(KafkaError):
        manager.get_log("t", 0).append_from_client(make_batch(value=b"x" * 200))
    manager.alter_topic_configs("t", {"max.message.bytes": None, "retention.ms": "7"}, incremental=True)
    assert manager.topics()["t"].configs == {"retention.ms": "7"}
    assert manager.get_log("t", 0).config["retention.ms"] == 7
    with pytest.raises(ValueError):
        manager.alter_topic_configs("t", {"no.such.config": "1"})
    assert manager.topics()["t"].configs == {"retention.ms": "7"}
    manager.shutdown()
    assert _manager(data).topics()["t"].configs == {"retention.ms": "7"}


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "a b", "x" * 250, "ü", "a\x00"])
def test_illegal_topic_names_are_refused_and_create_nothing(tmp_path: Path, name: str) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    with pytest.raises(ValueError):
        manager.create_topic(name, 1, {})
    assert sorted(p.name for p in data.iterdir()) == [".lock", "meta.properties"]
    assert not (tmp_path / "x-0").exists()


def test_longest_legal_topic_name_and_dots_work(tmp_path: Path) -> None:
    manager = _manager(tmp_path / "data")
    manager.create_topic("x" * 249, 2, {})
    manager.create_topic("a.b_c-d", 1, {})
    assert manager.get_log("x" * 249, 1).dir.name == "x" * 249 + "-1"


def test_bad_configs_duplicates_and_partition_counts_are_refused(tmp_path: Path) -> None:
    manager = _manager(tmp_path / "data")
    with pytest.raises(ValueError):
        manager.create_topic("t", 1, {"segment.bytes": "lots"})
    with pytest.raises(ValueError):
        manager.create_topic("t", 1, {"unknown.setting": "1"})
    with pytest.raises(KafkaError) as info:
        manager.create_topic("t", 0, {})
    assert info.value.code == ErrorCode.INVALID_PARTITIONS
    manager.create_topic("t", 1, {})
    with pytest.raises(KafkaError) as info:
        manager.create_topic("t", 1, {})
    assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_stray_partition_dirs_are_removed_and_a_lost_catalogue_is_rebuilt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    info = manager.create_topic("t", 2, {})
    manager.get_log("t", 1).append_from_client(make_batch(count=2))
    manager.shutdown()
    (data / "zombie-0").mkdir()
    (data / "t-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    manager = _manager(data)
    assert not (data / "zombie-0").exists()
    assert not (data / "t-0.0123456789abcdef0123456789abcdef-delete").exists()
    manager.shutdown()
    (data / "minikafka-topics.json").unlink()
    manager = _manager(data)
    assert manager.topics()["t"].topic_id == info.topic_id
    assert manager.topics()["t"].partitions == 2
    assert manager.get_log("t", 1).log_end_offset == 2


def test_an_unopenable_partition_stays_offline_without_stopping_the_others(tmp_path: Path) -> None:
    data = tmp_path / "data"
    manager = _manager(data)
    manager.create_topic("a", 1, {})
    manager.create_topic("b", 1, {})
    manager.shutdown()
    (data / "a-0" / "00000000000000000000.log").unlink()
    (data / "a-0" / "00000000000000000000.log").mkdir()  # a directory where the .log should be
    manager = _manager(data)
    assert manager.get_log("a", 0) is None and ("a", 0) in manager.offline
    assert manager.get_log("b", 0) is not None
    manager.shutdown()
    assert not (data / ".kafka_cleanshutdown").exists()


def test_uuid_text_form_is_22_chars_of_url_safe_base64(tmp_path: Path) -> None:
    value = uuid.UUID("1591d96b-5799-4e61-bff0-749d0329e734")
    assert ckpt.uuid_to_base64(value) == "FZHZa1eZTmG_8HSdAynnNA"
    assert ckpt.base64_to_uuid("FZHZa1eZTmG_8HSdAynnNA") == value


def test_new_partition_has_kafka_leader_epoch_checkpoint(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, BrokerConfig(data_dir=str(tmp_path)))
    manager.load()
    manager.create_topic("epochs", 1, {})
    assert (tmp_path / "epochs-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    manager.shutdown()
