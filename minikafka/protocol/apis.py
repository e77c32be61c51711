"""The Kafka APIs minikafka speaks, as the wire sees them: keys, names, served versions, codecs.

This is the protocol half of the API table; the broker adds a handler to each entry
(:mod:`minikafka.broker.dispatch`), and ApiVersions advertises exactly these versions. An entry
names its codec classes rather than holding them, and loads them the first time a request of
that API arrives: kafka-python builds every message class from its JSON schema at import, and
importing all of them up front was a third of ``minikafka serve``'s start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Any

from minikafka._kafka_codec import load_quietly


class ApiKey(IntEnum):
    """The API keys minikafka serves, with Kafka's names
    (https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/protocol/ApiKeys.java).

    Members compare equal to the plain ints of request headers. Reading a member off the class
    costs more than a global, so per-request code binds the few it needs to module constants."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


@dataclass(frozen=True)
class ApiCodec:
    """One Kafka API as minikafka reads and writes it."""

    key: ApiKey
    name: str  # Kafka's name without "Request", e.g. "Produce"
    min_version: int
    max_version: int
    codec_module: str  # kafka-python module holding <name>Request and <name>Response

    # Loaded through the one quiet scope: kafka-python warns while it loads (see _kafka_codec).
    @cached_property
    def request(self) -> Any:
        return load_quietly(self.codec_module, f"{self.name}Request")

    @cached_property
    def response(self) -> Any:
        return load_quietly(self.codec_module, f"{self.name}Response")

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @cached_property
    def _flexible_versions(self) -> frozenset[int]:
        return frozenset(v for v in range(self.min_version, self.max_version + 1)
                         if self.request.flexible_version_q(v))

    def flexible(self, version: int) -> bool:
        """Whether ``version`` (one this table serves) uses the flexible encodings."""
        return version in self._flexible_versions


#: key, name, min version, max version, kafka-python codec module
_CODECS: list[tuple[ApiKey, str, int, int, str]] = [
    (ApiKey.PRODUCE, "Produce", 0, 12, "kafka.protocol.producer"),
    # v13 topic ids (KIP-516), v15 ReplicaState (KIP-903), v16 leader hints (KIP-951), v17 directory id (KIP-853)
    (ApiKey.FETCH, "Fetch", 0, 17, "kafka.protocol.consumer"),
    (ApiKey.LIST_OFFSETS, "ListOffsets", 0, 8, "kafka.protocol.consumer"),
    (ApiKey.METADATA, "Metadata", 0, 13, "kafka.protocol.metadata"),  # v13: top-level error (KIP-1102)
    (ApiKey.OFFSET_COMMIT, "OffsetCommit", 0, 9, "kafka.protocol.consumer.group"),
    (ApiKey.OFFSET_FETCH, "OffsetFetch", 0, 9, "kafka.protocol.consumer.group"),
    (ApiKey.FIND_COORDINATOR, "FindCoordinator", 0, 4, "kafka.protocol.metadata.find_coordinator"),
    (ApiKey.JOIN_GROUP, "JoinGroup", 0, 9, "kafka.protocol.consumer.group"),
    (ApiKey.HEARTBEAT, "Heartbeat", 0, 4, "kafka.protocol.consumer.group"),
    (ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 5, "kafka.protocol.consumer.group"),
    (ApiKey.SYNC_GROUP, "SyncGroup", 0, 5, "kafka.protocol.consumer.group"),
    (ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 6, "kafka.protocol.admin.groups"),
    (ApiKey.LIST_GROUPS, "ListGroups", 0, 5, "kafka.protocol.admin.groups"),
    # SASL listeners (minikafka.broker.sasl); on other listeners they answer ILLEGAL_SASL_STATE
    (ApiKey.SASL_HANDSHAKE, "SaslHandshake", 0, 1, "kafka.protocol.sasl"),
    # v5: KIP-1242's cluster-id / node-id check; kafka-python's classes stop at v4
    (ApiKey.API_VERSIONS, "ApiVersions", 0, 5, "minikafka.protocol.api_versions_apis"),
    (ApiKey.CREATE_TOPICS, "CreateTopics", 0, 7, "kafka.protocol.admin"),
    (ApiKey.DELETE_TOPICS, "DeleteTopics", 0, 6, "kafka.protocol.admin"),
    (ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 2, "kafka.protocol.admin"),
    (ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 5, "kafka.protocol.producer"),
    # where a leader epoch ends (followers, KIP-320 consumers); kafka-python's codec has v2-v4
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4, "kafka.protocol.consumer"),
    # transactions (minikafka.broker.transactions); AddPartitionsToTxn v4+ is broker-to-coordinator
    # and answers CLUSTER_AUTHORIZATION_FAILED to clients; EndTxn v5 (KIP-890 part 2) is not served
    (ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 5, "kafka.protocol.producer"),
    (ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4, "kafka.protocol.producer"),
    (ApiKey.END_TXN, "EndTxn", 0, 4, "kafka.protocol.producer"),
    # sent by a transaction coordinator to partition leaders (minikafka.broker.cluster.markers); v1
    # only: kafka-python's codec starts there (Kafka 4.0 removed v0), v2 is KIP-890 part 2
    (ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", 1, 1, "kafka.protocol.producer"),
    (ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 4, "kafka.protocol.producer"),
    (ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", 0, 4, "kafka.protocol.admin"),
    (ApiKey.ALTER_CONFIGS, "AlterConfigs", 0, 2, "kafka.protocol.admin"),
    (ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, "kafka.protocol.sasl"),
    (ApiKey.CREATE_PARTITIONS, "CreatePartitions", 0, 3, "kafka.protocol.admin"),
    (ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 2, "kafka.protocol.admin.groups"),
    # answered by the cluster's controller (minikafka.broker.cluster); a single broker needs no election
    (ApiKey.ELECT_LEADERS, "ElectLeaders", 0, 2, "kafka.protocol.admin"),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, "kafka.protocol.admin"),
    (ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0, "kafka.protocol.consumer.group"),
    (ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", 0, 1, "kafka.protocol.admin"),
    (ApiKey.DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0, "kafka.protocol.admin"),
    (ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0, "kafka.protocol.admin"),
    (ApiKey.LIST_TRANSACTIONS, "ListTransactions", 0, 1, "kafka.protocol.admin"),
    # KIP-848 consumer groups; kafka-python has no classes for them (minikafka.protocol.schemas)
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1, "minikafka.protocol.consumer_group_apis"),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1, "minikafka.protocol.consumer_group_apis"),
]


def api_codecs() -> list[ApiCodec]:
    """Every API minikafka serves, in key order (a fresh list: codec classes are loaded per entry)."""
    return [ApiCodec(key, name, low, high, codec) for key, name, low, high, codec in _CODECS]
