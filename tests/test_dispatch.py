"""The dispatch table names real codec classes and handlers, and its keys are Kafka's."""

from __future__ import annotations

import inspect

from minikafka.broker.dispatch import build_api_table


def test_every_entry_loads_classes_whose_api_key_and_name_match_the_table() -> None:
    for key, spec in build_api_table().items():
        assert spec.request.API_KEY == key == spec.response.API_KEY, spec.name
        assert spec.request.name == f"{spec.name}Request"
        assert inspect.iscoroutinefunction(spec.handler), spec.handler_module
        assert spec.max_version <= spec.request.max_version, spec.name
