"""Codec classes of the KIP-848 consumer group APIs: ConsumerGroupHeartbeat (key 68) and
ConsumerGroupDescribe (key 69).

kafka-python 3 builds each message class from Kafka's JSON message definition but ships none for
these two APIs; their definitions are package data in :mod:`minikafka.protocol.schemas` and
kafka-python's loader reads them from there (``load_json=``), so they encode and decode exactly as
the classes of the other APIs do (flexible versions, tagged fields, nullable structs).
"""

from __future__ import annotations

import types
from typing import Any

from kafka.protocol.api_message import ApiMessage

SCHEMAS = "minikafka.protocol.schemas"


def message(name: str) -> Any:
    """The kafka-python message class of ``name`` (``<name>.json`` in :mod:`minikafka.protocol.schemas`)."""
    return types.new_class(name, (ApiMessage,), {"load_json": SCHEMAS})


ConsumerGroupHeartbeatRequest = message("ConsumerGroupHeartbeatRequest")
ConsumerGroupHeartbeatResponse = message("ConsumerGroupHeartbeatResponse")
ConsumerGroupDescribeRequest = message("ConsumerGroupDescribeRequest")
ConsumerGroupDescribeResponse = message("ConsumerGroupDescribeResponse")
