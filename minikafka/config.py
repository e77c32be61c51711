"""Broker and topic settings, under Kafka's own names and with Kafka's defaults.

Settings come from (lowest to highest priority) the defaults below, ``MINIKAFKA_*`` environment
variables (``MINIKAFKA_LOG_SEGMENT_BYTES=1048576`` sets ``log.segment.bytes``), and
``--config key=value`` on the command line or the ``config`` mapping of the Python API.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from minikafka.startup_errors import ConfigError

LONG_MAX = 9223372036854775807

#: Broker settings minikafka honours: name -> (type, default).
BROKER_DEFAULTS: dict[str, tuple[type, Any]] = {
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "message.max.bytes": (int, 1048588),
    "socket.request.max.bytes": (int, 104857600),
    "log.segment.bytes": (int, 1073741824),
    "log.roll.ms": (int, 604800000),
    "log.index.interval.bytes": (int, 4096),
    "log.index.size.max.bytes": (int, 10485760),
    "log.retention.ms": (int, 604800000),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    "log.flush.interval.messages": (int, LONG_MAX),
    "log.flush.interval.ms": (int, LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": (int, 60000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.message.timestamp.before.max.ms": (int, LONG_MAX),
    "log.message.timestamp.after.max.ms": (int, LONG_MAX),
    "log.cleanup.policy": (str, "delete"),
    "compression.type": (str, "producer"),
    "producer.id.expiration.ms": (int, 86400000),
    "producer.id.expiration.check.interval.ms": (int, 600000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.max.size": (int, 2147483647),
    # Answer as this Kafka release ("3.9", "4.0"; "" = every version served): minikafka.protocol.kafka_versions
    "minikafka.kafka.version": (str, ""),
    # KIP-848 consumer groups (minikafka.broker.groups.consumer_coordinator): Kafka's names and defaults
    "group.coordinator.rebalance.protocols": (str, "classic,consumer"),
    "group.consumer.session.timeout.ms": (int, 45000),
    "group.consumer.heartbeat.interval.ms": (int, 5000),
    # Bounds of a group's dynamic configs (minikafka.broker.group_configs), Kafka's names and defaults;
    # the share-group ones only bound the share.* group configs Kafka 4.0 defines.
    "group.consumer.min.session.timeout.ms": (int, 45000),
    "group.consumer.max.session.timeout.ms": (int, 60000),
    "group.consumer.min.heartbeat.interval.ms": (int, 5000),
    "group.consumer.max.heartbeat.interval.ms": (int, 15000),
    "group.share.min.session.timeout.ms": (int, 45000),
    "group.share.max.session.timeout.ms": (int, 60000),
    "group.share.min.heartbeat.interval.ms": (int, 5000),
    "group.share.max.heartbeat.interval.ms": (int, 15000),
    "group.share.record.lock.duration.ms": (int, 30000),
    "group.share.min.record.lock.duration.ms": (int, 15000),
    "group.share.max.record.lock.duration.ms": (int, 60000),
    "group.consumer.max.size": (int, 2147483647),
    "group.consumer.assignors": (str, "uniform,range"),
    "group.consumer.regex.refresh.interval.ms": (int, 600000),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.topic.segment.bytes": (int, 104857600),
    # A cluster's __consumer_offsets partitions (a single broker keeps one) and how long a
    # coordinator's write waits for the in-sync replicas.
    "offsets.topic.num.partitions": (int, 50),
    "offsets.commit.timeout.ms": (int, 5000),
    "offset.metadata.max.bytes": (int, 4096),
    "max.connections": (int, 2147483647),
    "max.connections.per.ip": (int, 2147483647),
    "connections.max.idle.ms": (int, 600000),
    # Hardening (docs/security.md): connection and memory limits beyond the ones above.
    "max.connections.per.ip.overrides": (str, ""),
    "socket.listen.backlog.size": (int, 1024),
    "sasl.server.max.receive.size": (int, 524288),
    "connection.failed.authentication.delay.ms": (int, 100),
    "minikafka.producer.state.max.entries": (int, 200000),
    # Partitions are created on the event loop (about 1 ms each): a bound keeps one CreateTopics or
    # CreatePartitions request from stalling every other client for seconds.
    "minikafka.topic.max.partitions": (int, 1000),
    # Listeners in Kafka's form; an empty "listeners" keeps the one PLAINTEXT listener on --host/--port.
    "listeners": (str, ""),
    "advertised.listeners": (str, ""),
    "listener.security.protocol.map": (
        str, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    "sasl.enabled.mechanisms": (str, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
    "ssl.keystore.type": (str, "PEM"),
    "ssl.keystore.location": (str, ""),
    "ssl.keystore.certificate.chain": (str, ""),
    "ssl.keystore.key": (str, ""),
    "ssl.key.password": (str, ""),
    "ssl.truststore.type": (str, "PEM"),
    "ssl.truststore.location": (str, ""),
    "ssl.client.auth": (str, "none"),
    "minikafka.sasl.users": (str, ""),
    "minikafka.sasl.users.file": (str, ""),
    "minikafka.sasl.scram.iterations": (int, 4096),
    "min.insync.replicas": (int, 1),
    # Transactions (minikafka.broker.transactions): Kafka's names and defaults.
    "transaction.max.timeout.ms": (int, 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10000),
    "transactional.id.expiration.ms": (int, 604800000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (int, 3600000),
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.state.log.segment.bytes": (int, 104857600),
    # Defaults of topic settings a single broker stores and describes (see TOPIC_CONFIG_SOURCES).
    "log.roll.jitter.ms": (int, 0),
    "log.segment.delete.delay.ms": (int, 60000),
    "log.preallocate": (bool, False),
    "log.message.format.version": (str, "3.0-IV1"),
    "log.message.timestamp.difference.max.ms": (int, LONG_MAX),
    "log.message.downconversion.enable": (bool, True),
    "log.local.retention.ms": (int, -2),
    "log.local.retention.bytes": (int, -2),
    "unclean.leader.election.enable": (bool, False),
    "compression.gzip.level": (int, -1),
    "compression.lz4.level": (int, 9),
    "compression.zstd.level": (int, 3),
    # The log cleaner (minikafka.storage.cleaner), under Kafka's names and defaults.
    "log.cleaner.enable": (bool, True),
    "log.cleaner.backoff.ms": (int, 15000),
    "log.cleaner.dedupe.buffer.size": (int, 134217728),
    "log.cleaner.io.max.bytes.per.second": (float, 1.7976931348623157e308),
    "log.cleaner.delete.retention.ms": (int, 86400000),
    "log.cleaner.min.compaction.lag.ms": (int, 0),
    "log.cleaner.max.compaction.lag.ms": (int, LONG_MAX),
    "log.cleaner.min.cleanable.ratio": (float, 0.5),
    # Replication between the brokers of a cluster (minikafka.broker.cluster), Kafka's names and defaults.
    "replica.lag.time.max.ms": (int, 30000),
    "broker.session.timeout.ms": (int, 9000),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.backoff.ms": (int, 1000),
    "replica.fetch.max.bytes": (int, 1048576),
    "replica.fetch.response.max.bytes": (int, 10485760),
    "replica.high.watermark.checkpoint.interval.ms": (int, 5000),
    "auto.leader.rebalance.enable": (bool, True),
    "leader.imbalance.check.interval.seconds": (int, 300),
    "offsets.topic.replication.factor": (int, 3),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "broker.rack": (str, ""),
}

#: The server-side assignors of KIP-848 groups (minikafka.broker.groups.assignors), for ``group.consumer.assignors``.
CONSUMER_ASSIGNORS = ("uniform", "range")
#: The releases ``minikafka.kafka.version`` may name ("" = none); minikafka.protocol.kafka_versions has each one's table.
KAFKA_RELEASES = ("", "3.9", "4.0")

#: Smallest value of an integer broker setting where it is not 0 (-1 means "unlimited" where allowed);
#: one that is the default of a topic setting has that setting's minimum (TOPIC_CONFIG_MINIMUM).
BROKER_SETTING_MINIMUM: dict[str, int] = {
    "num.partitions": 1,
    "default.replication.factor": 1,
    "socket.request.max.bytes": 1,
    "log.retention.check.interval.ms": 1,
    "log.flush.offset.checkpoint.interval.ms": 1,
    "replica.high.watermark.checkpoint.interval.ms": 1,
    "broker.session.timeout.ms": 1,
    "producer.id.expiration.ms": 1,
    "producer.id.expiration.check.interval.ms": 1,
    "group.max.size": 1,
    "group.consumer.session.timeout.ms": 1,
    "group.consumer.heartbeat.interval.ms": 1,
    **{f"group.{kind}.{bound}.{what}": 1 for kind, what in (("consumer", "session.timeout.ms"),
       ("consumer", "heartbeat.interval.ms"), ("share", "session.timeout.ms"), ("share", "heartbeat.interval.ms"),
       ("share", "record.lock.duration.ms")) for bound in ("min", "max")},
    "group.share.record.lock.duration.ms": 1000,
    "group.consumer.max.size": 1,
    "group.consumer.regex.refresh.interval.ms": 10000,  # Kafka's lower limit
    "offsets.retention.minutes": 1,
    "offsets.retention.check.interval.ms": 1,
    "offsets.topic.segment.bytes": 1,
    "offsets.topic.num.partitions": 1,
    "offsets.commit.timeout.ms": 1,
    "max.connections": 1,
    "max.connections.per.ip": 1,
    "connections.max.idle.ms": -1,
    "socket.listen.backlog.size": 1,
    "sasl.server.max.receive.size": 1,
    "minikafka.topic.max.partitions": 1,
    "min.insync.replicas": 1,
    "transaction.max.timeout.ms": 1,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1,
    "transactional.id.expiration.ms": 1,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 1,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.segment.bytes": 1,
}

#: Topic-level settings: topic name -> (broker setting it defaults to, type).
TOPIC_CONFIG_SOURCES: dict[str, tuple[str, type]] = {
    "segment.bytes": ("log.segment.bytes", int),
    "segment.ms": ("log.roll.ms", int),
    "segment.index.bytes": ("log.index.size.max.bytes", int),
    "index.interval.bytes": ("log.index.interval.bytes", int),
    "retention.ms": ("log.retention.ms", int),
    "retention.bytes": ("log.retention.bytes", int),
    "max.message.bytes": ("message.max.bytes", int),
    "message.timestamp.type": ("log.message.timestamp.type", str),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms", int),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms", int),
    "flush.messages": ("log.flush.interval.messages", int),
    "flush.ms": ("log.flush.interval.ms", int),
    "cleanup.policy": ("log.cleanup.policy", str),
    "compression.type": ("compression.type", str),
    "min.insync.replicas": ("min.insync.replicas", int),
    # Every other topic setting Kafka defines: stored, described, validated like Kafka; the ones a
    # single broker has no use for (replication, remote storage, preallocation) change nothing.
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", int),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", int),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", int),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", float),
    "message.downconversion.enable": ("log.message.downconversion.enable", bool),
    "segment.jitter.ms": ("log.roll.jitter.ms", int),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", int),
    "preallocate": ("log.preallocate", bool),
    "message.format.version": ("log.message.format.version", str),
    "message.timestamp.difference.max.ms": ("log.message.timestamp.difference.max.ms", int),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", bool),
    "compression.gzip.level": ("compression.gzip.level", int),
    "compression.lz4.level": ("compression.lz4.level", int),
    "compression.zstd.level": ("compression.zstd.level", int),
    "local.retention.ms": ("log.local.retention.ms", int),
    "local.retention.bytes": ("log.local.retention.bytes", int),
    "remote.storage.enable": ("", bool),
    "remote.log.copy.disable": ("", bool),
    "remote.log.delete.on.disable": ("", bool),
    "leader.replication.throttled.replicas": ("", str),
    "follower.replication.throttled.replicas": ("", str),
}
#: Defaults of the topic settings that have no broker setting ("" source above).
TOPIC_ONLY_DEFAULTS: dict[str, Any] = {
    "remote.storage.enable": False,
    "remote.log.copy.disable": False,
    "remote.log.delete.on.disable": False,
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
}


def _convert(kind: type, value: Any, name: str) -> Any:
    if isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool)):
        return value
    text = str(value).strip()
    if kind is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    return text


def parse_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and convert broker settings: an unknown name, a value of the wrong type or out of
    range raises :class:`ConfigError` (a broker refuses to start rather than ignore a setting)."""
    out: dict[str, Any] = {}
    for name, value in settings.items():
        kind = setting_kind(name)
        if kind is None:
            close = closest(name, list(BROKER_DEFAULTS))
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ConfigError(f"{name}={value}: unknown broker setting{hint}")
        out[name] = _checked(setting_base_name(name), _convert(kind, value, name))
    return out


def closest(name: str, known: list[str]) -> list[str]:
    """Up to three of ``known`` that ``name`` is a likely misspelling of: the closest, and the
    others about as close (``num.partition`` suggests ``num.partitions``, not also
    ``offsets.topic.num.partitions``, which merely contains it)."""
    scored = sorted(((difflib.SequenceMatcher(None, name, k).ratio(), k) for k in known), reverse=True)
    if not scored or scored[0][0] < 0.6:
        return []
    return [k for ratio, k in scored[:3] if ratio >= 0.6 and ratio >= scored[0][0] - 0.1]


def list_setting(text: str) -> list[str]:
    """The items of a comma-separated setting (Kafka's LIST type), stripped, empty ones left out."""
    return [item for item in (part.strip() for part in text.split(",")) if item]


def setting_base_name(name: str) -> str:
    """``listener.name.<listener>.<setting>`` -> ``<setting>``; other names unchanged."""
    if name.startswith("listener.name.") and name.count(".") >= 3:
        return name.split(".", 3)[3]
    return name


def setting_kind(name: str) -> type | None:
    """The type of a broker setting (a listener-prefixed one too), or None if minikafka does not know it."""
    known = BROKER_DEFAULTS.get(setting_base_name(name))
    return known[0] if known is not None else None


def _checked(name: str, value: Any) -> Any:
    """Range and choice checks, from the tables: a broker setting that is the default of a topic
    setting obeys that topic setting's limits; any other integer setting must be at least
    :data:`BROKER_SETTING_MINIMUM` (0 unless listed)."""
    topic_name = _TOPIC_NAME_OF.get(name)
    if BROKER_DEFAULTS[name][0] is int:
        minimum = BROKER_SETTING_MINIMUM.get(name, TOPIC_CONFIG_MINIMUM.get(topic_name or "", 0))
        if value < minimum:
            raise ConfigError(f"{name}={value}: expected at least {minimum}")
    choices = TOPIC_CONFIG_CHOICES.get(topic_name or "")
    if choices is not None and value not in choices:
        raise ConfigError(f"{name}={value}: expected one of {', '.join(sorted(choices))}")
    if name == "group.consumer.assignors":
        names = [a.strip() for a in str(value).split(",")]
        if not all(a in CONSUMER_ASSIGNORS for a in names):
            raise ConfigError(f"{name}={value}: expected a list of {', '.join(CONSUMER_ASSIGNORS)}")
    if name == "minikafka.kafka.version" and value not in KAFKA_RELEASES:
        raise ConfigError(f"{name}={value}: expected one of {', '.join(r for r in KAFKA_RELEASES if r)}")
    return value


#: Every MINIKAFKA_ variable read by minikafka, its image or its build scripts, besides the broker
#: settings' own (:func:`setting_variable`): variable -> what reads it. ``minikafka serve`` refuses
#: any other MINIKAFKA_ variable, which is almost always a misspelt one that would be ignored.
VARIABLES: dict[str, str] = {
    "MINIKAFKA_HOST": "serve --host; ping's default host; set by the Docker image",
    "MINIKAFKA_PORT": "serve --port; ping's default port (without an address file); set by the Docker image",
    "MINIKAFKA_DATA_DIR": "serve --data-dir; set by the Docker image",
    "MINIKAFKA_NODE_ID": "serve --node-id",
    "MINIKAFKA_ADVERTISED_HOST": "serve --advertised-host",
    "MINIKAFKA_ADVERTISED_PORT": "serve --advertised-port",
    "MINIKAFKA_LOG_LEVEL": "serve --log-level",
    "MINIKAFKA_FAULTS": "serve --faults",
    "MINIKAFKA_ADMIN_PORT": "serve --admin-port; set by the Docker image",
    "MINIKAFKA_ADMIN_HOST": "serve --admin-host",
    "MINIKAFKA_ADDRESS_FILE": "serve --address-file; where ping finds the broker (the image's health check); "
                              "set by the Docker image",
    "MINIKAFKA_FSYNC": "serve --fsync",
    "MINIKAFKA_BROKERS": "serve --brokers",
    "MINIKAFKA_EAGER_IMPORTS": "serve: import the codec packages at start (bench/startup.py's baseline)",
    "MINIKAFKA_BASE_IMAGE": "tests/container/build_image.sh and tests/test_docker.py: the image's base",
    "MINIKAFKA_IMAGE": "tests/container/build_image.sh: the tag of the image it builds",
    "MINIKAFKA_CI_CACHE": "tests/container/build_image.sh: where it caches the base image",
}


def setting_variable(name: str) -> str:
    """The environment variable of a broker setting: ``log.segment.bytes`` -> ``MINIKAFKA_LOG_SEGMENT_BYTES``."""
    return "MINIKAFKA_" + name.upper().replace(".", "_")


def settings_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``MINIKAFKA_LOG_SEGMENT_BYTES`` -> ``log.segment.bytes`` for every known broker setting."""
    environ = os.environ if environ is None else environ
    return {name: environ[setting_variable(name)] for name in BROKER_DEFAULTS if setting_variable(name) in environ}


def unknown_variables(environ: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """The MINIKAFKA_ variables of ``environ`` that nothing reads, each with the known ones closest
    to it (compared without the common prefix, which would make every name look close)."""
    environ = os.environ if environ is None else environ
    known = [name.removeprefix("MINIKAFKA_") for name in
             [*VARIABLES, *(setting_variable(setting) for setting in BROKER_DEFAULTS)]]
    out: dict[str, list[str]] = {}
    for variable in sorted(environ):
        if variable.startswith("MINIKAFKA_") and variable.removeprefix("MINIKAFKA_") not in known:
            close = closest(variable.removeprefix("MINIKAFKA_"), known)
            out[variable] = ["MINIKAFKA_" + name for name in close]
    return out


@dataclass
class BrokerConfig:
    """Everything a broker needs to start: listener, identity, data dir and Kafka settings."""

    host: str = "127.0.0.1"
    port: int = 9092
    data_dir: str = "./minikafka-data"
    node_id: int = 1
    advertised_host: str | None = None
    advertised_port: int | None = None
    fsync: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    #: set for a broker of a cluster: the cluster's id, which its data dir must carry
    cluster_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("port", "advertised_port"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 65535:
                raise ConfigError(f"{name}={value}: expected a port number from 0 to 65535")
        self.settings = parse_settings(self.settings)

    def get(self, name: str) -> Any:
        """A broker setting, falling back to Kafka's default."""
        if name in self.settings:
            return self.settings[name]
        return BROKER_DEFAULTS[name][1]

    def topic_defaults(self) -> dict[str, Any]:
        """Topic-level settings as a topic created now would get them."""
        return {name: self.topic_default(name) for name in TOPIC_CONFIG_SOURCES}

    def topic_default(self, name: str) -> Any:
        """The value a topic without an override of ``name`` has."""
        source = TOPIC_CONFIG_SOURCES[name][0]
        return self.get(source) if source else TOPIC_ONLY_DEFAULTS[name]


#: Smallest value Kafka accepts for numeric topic settings (-1 means "unlimited" where allowed).
TOPIC_CONFIG_MINIMUM: dict[str, int] = {
    "segment.bytes": 14,
    "segment.ms": 1,
    "segment.index.bytes": 8,
    "index.interval.bytes": 0,
    "retention.ms": -1,
    "retention.bytes": -1,
    "max.message.bytes": 0,
    "message.timestamp.before.max.ms": 0,
    "message.timestamp.after.max.ms": 0,
    "flush.messages": 1,
    "flush.ms": 0,
    "min.insync.replicas": 1,
    "delete.retention.ms": 0,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": 1,
    "min.cleanable.dirty.ratio": 0,
    "segment.jitter.ms": 0,
    "file.delete.delay.ms": 0,
    "message.timestamp.difference.max.ms": 0,
    "compression.gzip.level": -1,
    "compression.lz4.level": 1,
    "compression.zstd.level": -131072,
    "local.retention.ms": -2,
    "local.retention.bytes": -2,
}
#: Largest value Kafka accepts where it has a bound.
TOPIC_CONFIG_MAXIMUM: dict[str, float] = {
    "min.cleanable.dirty.ratio": 1,
    "compression.gzip.level": 9,
    "compression.lz4.level": 17,
    "compression.zstd.level": 22,
}
#: Allowed values of the string topic settings.
TOPIC_CONFIG_CHOICES: dict[str, frozenset[str]] = {
    "message.timestamp.type": frozenset({"CreateTime", "LogAppendTime"}),
    "cleanup.policy": frozenset({"delete", "compact", "compact,delete", "delete,compact"}),
    "compression.type": frozenset({"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}),
}

_FORMAT_VERSION = re.compile(r"^\d+\.\d+(\.\d+){0,2}(-IV\d+)?$")


#: broker setting -> the topic setting it is the default of
_TOPIC_NAME_OF: dict[str, str] = {source: topic for topic, (source, _kind) in TOPIC_CONFIG_SOURCES.items() if source}


def parse_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Convert topic-level overrides; raises ValueError for unknown names or bad values."""
    out: dict[str, Any] = {}
    for name, value in configs.items():
        if name not in TOPIC_CONFIG_SOURCES:
            raise ValueError(f"unknown topic config {name}")
        kind = TOPIC_CONFIG_SOURCES[name][1]
        converted = _convert(kind, value, name)
        minimum = TOPIC_CONFIG_MINIMUM.get(name)
        if minimum is not None and converted < minimum:
            raise ValueError(f"{name}: {converted} is below the minimum {minimum}")
        maximum = TOPIC_CONFIG_MAXIMUM.get(name)
        if maximum is not None and converted > maximum:
            raise ValueError(f"{name}: {converted} is above the maximum {maximum}")
        if name == "message.format.version" and not _FORMAT_VERSION.match(converted):
            raise ValueError(f"{name}: {converted!r} is not a Kafka version such as 0.10.2 or 3.0-IV1")
        choices = TOPIC_CONFIG_CHOICES.get(name)
        if choices is not None and converted not in choices:
            raise ValueError(f"{name}: {converted!r} is not one of {sorted(choices)}")
        out[name] = converted
    return out


def default_setting(name: str) -> Any:
    """Kafka's default of a broker or topic setting (a topic setting defaults to its broker source's)."""
    if name in BROKER_DEFAULTS:
        return BROKER_DEFAULTS[name][1]
    source = TOPIC_CONFIG_SOURCES[name][0]
    return BROKER_DEFAULTS[source][1] if source else TOPIC_ONLY_DEFAULTS[name]


def topic_setting(config: Mapping[str, Any], name: str, default: Any) -> Any:
    """A topic's effective setting from its config mapping, ``default`` where it is unset or None."""
    value = config.get(name)
    return value if value is not None else default


def topic_config(config: Mapping[str, Any], name: str) -> Any:
    """A topic's effective setting: its override where set, else Kafka's default (:func:`default_setting`)."""
    return topic_setting(config, name, default_setting(name))


def timestamp_bounds(config: Mapping[str, Any]) -> tuple[int, int]:
    """``message.timestamp.before.max.ms`` and ``.after.max.ms``; where one is unset (LONG_MAX) the
    deprecated ``message.timestamp.difference.max.ms`` applies, as in Kafka's ``LogConfig`` (KIP-937)."""
    difference = int(topic_setting(config, "message.timestamp.difference.max.ms", LONG_MAX))
    before = int(topic_setting(config, "message.timestamp.before.max.ms", LONG_MAX))
    after = int(topic_setting(config, "message.timestamp.after.max.ms", LONG_MAX))
    return before if before != LONG_MAX else difference, after if after != LONG_MAX else difference
