"""Every advertised (API, version) pair answers a valid request with a response of that version.

The requests are built with kafka-python's message classes for each version, sent over a real
socket, and the response decoded with the same version: an encoding mistake in any version
of any API shows up here, not in some client months later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from minikafka.broker.dispatch import build_api_table
from minikafka.broker.embedded import BrokerThread
from tests.fuzz_requests import EXPECTED_ERRORS, SPECIFIC
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic

T = "versions"
#: Requests that do real work on topic T, for every core API (shared with the fuzz suite's seeds).
#: The SASL APIs are left out: on a plaintext listener Kafka answers them with ILLEGAL_SASL_STATE.
BUILDERS: dict[int, Callable[[int], Any]] = {
    key: (lambda v, build=build: build(v, T)) for key, build in SPECIFIC.items() if key not in (17, 36)
}

CASES = [(spec.key, v) for spec in build_api_table().values() if spec.key in BUILDERS
         for v in range(spec.min_version, spec.max_version + 1)]


def test_every_api_in_the_table_has_a_version_case() -> None:
    core = {0, 1, 2, 3, 18, 19, 20, 21, 22, 32, 33, 37, 44, 60, 61}
    assert core <= set(build_api_table()), "a core API went missing from the dispatch table"


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    broker = BrokerThread(data_dir=str(tmp_path_factory.mktemp("versions")), port=0).start()
    with RawClient(broker.bootstrap) as c:
        create_topic(c, T)
    yield broker
    broker.stop()


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"api{k}-v{v}" for k, v in CASES])
def test_request_of_each_version_gets_a_decodable_response_of_that_version(
    shared_broker: BrokerThread, api_key: int, version: int
) -> None:
    request = BUILDERS[api_key](version)
    with RawClient(shared_broker.bootstrap) as c:
        response = c.request(request)
    assert response.API_VERSION == version
    if hasattr(response, "error_code") and api_key != 18:
        assert response.error_code == EXPECTED_ERRORS.get((api_key, version), 0), response
    if api_key == 18:
        assert response.error_code == 0
        assert {k.api_key for k in response.api_keys} == set(build_api_table())
    if api_key in (33, 44):  # the (validate-only) change of topic T is accepted in every version
        assert [(r.resource_name, r.error_code) for r in response.responses] == [(T, 0)]
    if api_key == 43:  # a single broker already leads with its preferred replica
        assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
                for r in response.replica_election_results] == [(T, [(0, 84)])]


def test_metadata_v13_has_a_top_level_error_and_finds_topics_by_id(broker: BrokerThread) -> None:
    """KIP-1102 (Kafka 4.0): Metadata v13 adds a top-level error code, which Kafka's broker always
    answers 0; lookups by topic id (v12+) work the same."""
    from kafka.protocol.metadata import MetadataRequest

    with RawClient(broker.bootstrap) as c:
        create_topic(c, "by-id", 2)
        Request = MetadataRequest[13]
        listed = c.request(Request(topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False))
        assert listed.error_code == 0
        (topic,) = [t for t in listed.topics if t.name == "by-id"]
        found = c.request(Request(topics=[Request.MetadataRequestTopic(topic_id=topic.topic_id, name=None)],
                                  allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert (found.error_code, [(t.name, len(t.partitions)) for t in found.topics]) == (0, [("by-id", 2)])
