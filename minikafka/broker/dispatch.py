"""The dispatch table: each API minikafka serves, with the handler that answers it.

The protocol says which APIs and versions minikafka speaks and how they are encoded
(:mod:`minikafka.protocol.apis`); this module pairs each of them with its handler module, and
ApiVersions advertises exactly the resulting table. Handlers, like codec classes, are loaded on
the first request of their API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from minikafka._kafka_codec import load_quietly
from minikafka.protocol.apis import ApiCodec, ApiKey, api_codecs
from minikafka.protocol.kafka_versions import KafkaRelease

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

    from minikafka.broker.context import RequestContext

#: A handler module's ``handle(ctx, request)``. Each handler takes its own API's request family (e.g.
#: ``DeleteRecordsRequest``), so the table can only say "a request"; the answer is that API's
#: response, or None when nothing is sent back (Produce with acks=0).
Handler = Callable[["RequestContext", Any], Awaitable["ApiMessage | None"]]

_HANDLERS = "minikafka.broker.handlers."

#: API key -> module under minikafka.broker.handlers with its ``async def handle(ctx, request)``
_HANDLER_MODULES: dict[ApiKey, str] = {
    ApiKey.PRODUCE: "produce",
    ApiKey.FETCH: "fetch",
    ApiKey.LIST_OFFSETS: "list_offsets",
    ApiKey.METADATA: "metadata",
    ApiKey.OFFSET_COMMIT: "offset_commit",
    ApiKey.OFFSET_FETCH: "offset_fetch",
    ApiKey.FIND_COORDINATOR: "find_coordinator",
    ApiKey.JOIN_GROUP: "join_group",
    ApiKey.HEARTBEAT: "heartbeat",
    ApiKey.LEAVE_GROUP: "leave_group",
    ApiKey.SYNC_GROUP: "sync_group",
    ApiKey.DESCRIBE_GROUPS: "describe_groups",
    ApiKey.LIST_GROUPS: "list_groups",
    ApiKey.SASL_HANDSHAKE: "sasl_handshake",
    ApiKey.API_VERSIONS: "api_versions",
    ApiKey.CREATE_TOPICS: "create_topics",
    ApiKey.DELETE_TOPICS: "delete_topics",
    ApiKey.DELETE_RECORDS: "delete_records",
    ApiKey.INIT_PRODUCER_ID: "init_producer_id",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "offset_for_leader_epoch",
    ApiKey.ADD_PARTITIONS_TO_TXN: "add_partitions_to_txn",
    ApiKey.ADD_OFFSETS_TO_TXN: "add_offsets_to_txn",
    ApiKey.END_TXN: "end_txn",
    ApiKey.WRITE_TXN_MARKERS: "write_txn_markers",
    ApiKey.TXN_OFFSET_COMMIT: "txn_offset_commit",
    ApiKey.DESCRIBE_CONFIGS: "describe_configs",
    ApiKey.ALTER_CONFIGS: "alter_configs",
    ApiKey.SASL_AUTHENTICATE: "sasl_authenticate",
    ApiKey.CREATE_PARTITIONS: "create_partitions",
    ApiKey.DELETE_GROUPS: "delete_groups",
    ApiKey.ELECT_LEADERS: "elect_leaders",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "incremental_alter_configs",
    ApiKey.OFFSET_DELETE: "offset_delete",
    ApiKey.DESCRIBE_CLUSTER: "describe_cluster",
    ApiKey.DESCRIBE_PRODUCERS: "describe_producers",
    ApiKey.DESCRIBE_TRANSACTIONS: "describe_transactions",
    ApiKey.LIST_TRANSACTIONS: "list_transactions",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "consumer_group_heartbeat",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "consumer_group_describe",
}


@dataclass(frozen=True)
class ApiSpec(ApiCodec):
    """One row of the broker's table: the API's codec, and the module of the handler that answers it.

    A subclass rather than a pair, so that the connection reads the version range, the codec and
    the handler off one object per request."""

    handler_module: str  # module with ``async def handle(ctx, request)``

    @cached_property
    def handler(self) -> Handler:
        handle: Handler = load_quietly(self.handler_module, "handle")
        return handle


def build_api_table(kafka_release: KafkaRelease | None = None) -> dict[int, ApiSpec]:
    """Every API minikafka serves; with ``kafka_release``, only the versions that release lists."""
    table: dict[int, ApiSpec] = {}
    for codec in api_codecs():
        versions = (codec.min_version, codec.max_version) if kafka_release is None else \
            kafka_release.narrow(codec.key, codec.min_version, codec.max_version)
        if versions is not None:
            table[codec.key] = ApiSpec(codec.key, codec.name, versions[0], versions[1], codec.codec_module,
                                       _HANDLERS + _HANDLER_MODULES[codec.key])
    return table
