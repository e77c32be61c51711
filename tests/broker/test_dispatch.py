"""The dispatch table names real codec classes and handlers, and its keys are Kafka's."""

from __future__ import annotations

import inspect

from minikafka.broker.dispatch import build_api_table
from minikafka.protocol.apis import ApiKey, api_codecs


def test_every_entry_loads_classes_whose_api_key_and_name_match_the_table() -> None:
    for key, spec in build_api_table().items():
        assert spec.request.API_KEY == key == spec.response.API_KEY, spec.name
        assert spec.request.name == f"{spec.name}Request"
        assert inspect.iscoroutinefunction(spec.handler), spec.handler_module
        assert spec.max_version <= spec.request.max_version, spec.name


def test_the_broker_answers_every_api_the_protocol_serves_under_kafka_s_name() -> None:
    table = build_api_table()
    assert list(table) == [codec.key for codec in api_codecs()] == sorted(ApiKey)
    for key, spec in table.items():
        assert spec.key is key and isinstance(key, ApiKey)
        assert spec.name == key.name.title().replace("_", ""), key  # INIT_PRODUCER_ID: InitProducerId
        assert spec.handler_module == f"minikafka.broker.handlers.{key.name.lower()}"
