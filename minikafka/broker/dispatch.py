"""The dispatch table: API key -> served versions, codec classes, handler module.

This is the one place that says which Kafka APIs minikafka speaks; ApiVersions advertises
exactly this table. Codec classes and handlers are loaded on the first request of each API
(see :class:`minikafka.protocol.apis.ApiSpec`).
"""

from __future__ import annotations

from minikafka.protocol.apis import ApiSpec

_HANDLERS = "minikafka.broker.handlers."

#: key, name, min version, max version, kafka-python codec module, handler module
_TABLE: list[tuple[int, str, int, int, str, str]] = [
    (0, "Produce", 0, 12, "kafka.protocol.producer", "produce"),
    (1, "Fetch", 0, 12, "kafka.protocol.consumer", "fetch"),
    (2, "ListOffsets", 0, 8, "kafka.protocol.consumer", "list_offsets"),
    (3, "Metadata", 0, 12, "kafka.protocol.metadata", "metadata"),
    (8, "OffsetCommit", 0, 9, "kafka.protocol.consumer.group", "offset_commit"),
    (9, "OffsetFetch", 0, 9, "kafka.protocol.consumer.group", "offset_fetch"),
    (10, "FindCoordinator", 0, 4, "kafka.protocol.metadata.find_coordinator", "find_coordinator"),
    (11, "JoinGroup", 0, 9, "kafka.protocol.consumer.group", "join_group"),
    (12, "Heartbeat", 0, 4, "kafka.protocol.consumer.group", "heartbeat"),
    (13, "LeaveGroup", 0, 5, "kafka.protocol.consumer.group", "leave_group"),
    (14, "SyncGroup", 0, 5, "kafka.protocol.consumer.group", "sync_group"),
    (15, "DescribeGroups", 0, 6, "kafka.protocol.admin.groups", "describe_groups"),
    (16, "ListGroups", 0, 5, "kafka.protocol.admin.groups", "list_groups"),
    # SASL listeners (minikafka.broker.sasl); on other listeners they answer ILLEGAL_SASL_STATE
    (17, "SaslHandshake", 0, 1, "kafka.protocol.sasl", "sasl_handshake"),
    (18, "ApiVersions", 0, 4, "kafka.protocol.metadata", "api_versions"),
    (19, "CreateTopics", 0, 7, "kafka.protocol.admin", "create_topics"),
    (20, "DeleteTopics", 0, 6, "kafka.protocol.admin", "delete_topics"),
    (21, "DeleteRecords", 0, 2, "kafka.protocol.admin", "delete_records"),
    (22, "InitProducerId", 0, 5, "kafka.protocol.producer", "init_producer_id"),
    # transactions (minikafka.broker.transactions); AddPartitionsToTxn v4+ is broker-to-coordinator
    # and answers CLUSTER_AUTHORIZATION_FAILED to clients; EndTxn v5 (KIP-890 part 2) is not served
    (24, "AddPartitionsToTxn", 0, 5, "kafka.protocol.producer", "add_partitions_to_txn"),
    (25, "AddOffsetsToTxn", 0, 4, "kafka.protocol.producer", "add_offsets_to_txn"),
    (26, "EndTxn", 0, 4, "kafka.protocol.producer", "end_txn"),
    (28, "TxnOffsetCommit", 0, 4, "kafka.protocol.producer", "txn_offset_commit"),
    (32, "DescribeConfigs", 0, 4, "kafka.protocol.admin", "describe_configs"),
    (33, "AlterConfigs", 0, 2, "kafka.protocol.admin", "alter_configs"),
    (36, "SaslAuthenticate", 0, 2, "kafka.protocol.sasl", "sasl_authenticate"),
    (37, "CreatePartitions", 0, 3, "kafka.protocol.admin", "create_partitions"),
    (42, "DeleteGroups", 0, 2, "kafka.protocol.admin.groups", "delete_groups"),
    (44, "IncrementalAlterConfigs", 0, 1, "kafka.protocol.admin", "incremental_alter_configs"),
    (47, "OffsetDelete", 0, 0, "kafka.protocol.consumer.group", "offset_delete"),
    (60, "DescribeCluster", 0, 1, "kafka.protocol.admin", "describe_cluster"),
    (61, "DescribeProducers", 0, 0, "kafka.protocol.admin", "describe_producers"),
    (65, "DescribeTransactions", 0, 0, "kafka.protocol.admin", "describe_transactions"),
    (66, "ListTransactions", 0, 1, "kafka.protocol.admin", "list_transactions"),
]


def build_api_table() -> dict[int, ApiSpec]:
    return {
        key: ApiSpec(key, name, low, high, codec, _HANDLERS + handler)
        for key, name, low, high, codec, handler in _TABLE
    }
