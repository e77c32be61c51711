"""Group configs across a cluster, kept by the controller as Kafka keeps them in its metadata log:
a change taken by any broker is described the same by every broker, survives a restart of the
whole cluster, and is in force at whichever broker coordinates the group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minikafka.broker.embedded import ClusterThread
from minikafka.errors import ErrorCode
from tests.broker.test_alter_configs import SET, incremental
from tests.broker.test_group_configs import (
    DEFAULT_CONFIG,
    GROUP,
    GROUP_CONFIG,
    HEARTBEAT,
    SESSION,
    group_configs,
)
from tests.cluster.test_cluster_coordinators import SETTINGS, first_lookup
from tests.cluster.test_cluster_failover import wait_for
from tests.groups.consumer_group_wire import join
from tests.kafka_wire import RawClient
from tests.scenario_helpers import create_topic


def test_a_groups_configs_are_the_controllers(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "cluster")
    with ClusterThread(brokers=3, data_dir=data_dir, config=SETTINGS) as cluster:
        with RawClient(cluster.address(2)) as c:
            r = incremental(c, 1, GROUP, "g", [(SESSION, SET, "50000"), (HEARTBEAT, SET, "6000")])
            assert r.error_code == ErrorCode.NONE, r
            bad = incremental(c, 1, GROUP, "g", [(SESSION, SET, "1")])
            assert bad.error_code == ErrorCode.INVALID_CONFIG
            create_topic(c, "t")
        for node in (1, 2, 3):
            with RawClient(cluster.address(node)) as c:
                configs = group_configs(c, "g")
                assert (configs[SESSION], configs[HEARTBEAT]) == (("50000", GROUP_CONFIG), ("6000", GROUP_CONFIG))
                assert group_configs(c, "other")[SESSION] == ("45000", DEFAULT_CONFIG)
    with ClusterThread(brokers=3, data_dir=data_dir, config=SETTINGS) as again:
        with RawClient(again.address(3)) as c:
            assert group_configs(c, "g")[HEARTBEAT] == ("6000", GROUP_CONFIG)
        _, node = first_lookup(again, "g", 0)
        with RawClient(again.address(node)) as c:
            answers: list[Any] = []

            def joined() -> bool:  # the coordinator may still be loading (COORDINATOR_LOAD_IN_PROGRESS)
                answers.append(join(c, "g", "m1", ["t"]))
                return bool(answers[-1].error_code == ErrorCode.NONE)

            wait_for(joined, "the coordinator to take the join")
            assert answers[-1].heartbeat_interval_ms == 6000
