"""A KIP-848 group's dynamic configs in force: the coordinator fences a member that stops
heartbeating after the group's ``consumer.session.timeout.ms``, not the broker's, and tells members
the group's ``consumer.heartbeat.interval.ms``; a change reaches a member at its next heartbeat, as
in Kafka (the session timer is re-armed with the group's timeout of that moment). Raw-protocol
timeouts run on the broker's injectable clock; the confluent-kafka case kills a consumer process
and waits for the fencing."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from minikafka.broker.embedded import BrokerThread
from tests.broker.test_alter_configs import SET, incremental
from tests.groups.consumer_group_wire import beat, describe, join
from tests.groups.test_consumer_group_clients import Crasher
from tests.groups.test_consumer_group_protocol import wait_for
from tests.kafka_wire import RawClient
from tests.scenario_helpers import clock_ahead, create_topic

GROUP = 32
SESSION_MS = 3000
CONFIG = {"group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.heartbeat.interval.ms": "500",
          "group.consumer.min.session.timeout.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "100"}


def members(c: RawClient, group: str) -> list[str]:
    return sorted(m.member_id for m in describe(c, group)[0].members)


def set_group(c: RawClient, group: str, session_ms: int, heartbeat_ms: int) -> None:
    r = incremental(c, 1, GROUP, group, [("consumer.session.timeout.ms", SET, str(session_ms)),
                                         ("consumer.heartbeat.interval.ms", SET, str(heartbeat_ms))])
    assert r.error_code == 0, r


def test_a_groups_session_timeout_and_heartbeat_interval(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(CONFIG)
    assert broker.broker is not None
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t")
        set_group(c, "long", 10000, 700)
        assert join(c, "long", "a", ["t"]).heartbeat_interval_ms == 700
        assert join(c, "plain", "b", ["t"]).heartbeat_interval_ms == 500
        # past the broker's 3 s: the plain group's member is fenced, the long group's is not
        with clock_ahead(broker.broker, SESSION_MS + 1000):
            wait_for(lambda: members(c, "plain") == [])
            assert members(c, "long") == ["a"]
        with clock_ahead(broker.broker, 10000 + 1000):
            wait_for(lambda: members(c, "long") == [])


def test_a_change_reaches_a_member_at_its_next_heartbeat(start_broker: Callable[..., BrokerThread]) -> None:
    broker = start_broker(CONFIG)
    assert broker.broker is not None
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t")
        first = join(c, "g", "a", ["t"])
        assert first.heartbeat_interval_ms == 500
        join(c, "g", "idle", ["t"])  # never heartbeats again: its session was armed with 3 s
        join(c, "plain", "b", ["t"])
        set_group(c, "g", 10000, 800)
        assert beat(c, "g", "a", first.member_epoch).heartbeat_interval_ms == 800  # re-armed with 10 s
        with clock_ahead(broker.broker, SESSION_MS + 1000):
            wait_for(lambda: members(c, "plain") == [] and members(c, "g") == ["a"])
        r = incremental(c, 1, GROUP, "g", [("consumer.session.timeout.ms", 1, None),
                                           ("consumer.heartbeat.interval.ms", 1, None)])
        assert r.error_code == 0
        assert beat(c, "g", "a", describe(c, "g")[0].members[0].member_epoch).heartbeat_interval_ms == 500
        with clock_ahead(broker.broker, SESSION_MS + 1000):
            wait_for(lambda: members(c, "g") == [])


def test_a_killed_consumer_is_fenced_after_the_groups_session_timeout(
        start_broker: Callable[..., BrokerThread]) -> None:
    """With the broker's 60 s session timeout the killed member would stay a minute; the group's
    override of 2 s fences it in a few seconds."""
    broker = start_broker({**CONFIG, "group.consumer.session.timeout.ms": "60000",
                           "group.consumer.heartbeat.interval.ms": "5000"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, "g", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "2000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("consumer.heartbeat.interval.ms", "200", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    with RawClient(broker.bootstrap) as c:
        create_topic(c, "t", 2)
        crasher = Crasher(broker.bootstrap, "g", "t")
        try:
            crasher.read_until(lambda: crasher.assigned == 2, [])
            assert len(members(c, "g")) == 1
        finally:
            crasher.kill()
        killed = time.monotonic()
        wait_for(lambda: members(c, "g") == [], timeout=30)
        assert time.monotonic() - killed < 30  # far below the broker's 60 s
