"""Answering as a given Kafka release: ``minikafka serve --kafka-version X.Y``
(setting ``minikafka.kafka.version``).

By default minikafka advertises every version it serves. A test that must see what a client does
against one release sets that release: ApiVersions then lists the API versions it lists, a
request outside them closes the connection as that release's broker does (ApiVersions excepted:
it answers UNSUPPORTED_VERSION with its own range), and the behaviours that depend on the release
follow it. Only narrowing is possible: a release whose range reaches beyond what minikafka serves
gets minikafka's end of it.

- ``3.9``: the KIP-848 consumer group protocol is not offered (ConsumerGroupHeartbeat and
  ConsumerGroupDescribe are not listed, ``group.version`` is not finalized), Metadata up to v12.
- ``4.0``: the removals of KIP-896 (Produce keeps advertising v0, as Kafka does for librdkafka;
  Metadata keeps v0-v3; JoinGroup from v2 as in 4.0.0), Metadata v13, KIP-848 on.

Ranges from Kafka's message definitions at each release's tag
(https://github.com/apache/kafka/tree/4.0.0/clients/src/main/resources/common/message,
https://github.com/apache/kafka/tree/3.9.0/clients/src/main/resources/common/message).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minikafka.protocol.apis import ApiKey


@dataclass(frozen=True)
class KafkaRelease:
    """What one release changes in minikafka's table: ranges by API key (None: not listed)."""

    name: str
    ranges: dict[ApiKey, tuple[int, int] | None] = field(default_factory=dict)
    consumer_protocol: bool = True  # KIP-848 offered (group.version finalized at 1)

    def narrow(self, key: int, low: int, high: int) -> tuple[int, int] | None:
        """The range this release advertises for an API minikafka serves at ``low``-``high``."""
        if key not in self.ranges:
            return low, high
        wanted = self.ranges[ApiKey(key)]
        if wanted is None:
            return None
        new_low, new_high = max(low, wanted[0]), min(high, wanted[1])
        return (new_low, new_high) if new_low <= new_high else None


K = ApiKey
RELEASES: dict[str, KafkaRelease] = {
    "3.9": KafkaRelease("3.9", {
        K.API_VERSIONS: (0, 4), K.METADATA: (0, 12), K.CONSUMER_GROUP_HEARTBEAT: None, K.CONSUMER_GROUP_DESCRIBE: None,
    }, consumer_protocol=False),
    "4.0": KafkaRelease("4.0", {
        K.FETCH: (4, 17), K.LIST_OFFSETS: (1, 10), K.OFFSET_COMMIT: (2, 9), K.OFFSET_FETCH: (1, 9),
        K.JOIN_GROUP: (2, 9), K.CREATE_TOPICS: (2, 7), K.DELETE_TOPICS: (1, 6), K.DESCRIBE_CONFIGS: (1, 4),
        K.METADATA: (0, 13), K.API_VERSIONS: (0, 4),
    }),
}


def release(name: str) -> KafkaRelease | None:
    """The release of ``minikafka.kafka.version`` ("" or unknown: none, everything minikafka
    serves; the setting is checked against :data:`minikafka.config.KAFKA_RELEASES`)."""
    return RELEASES.get(name)
