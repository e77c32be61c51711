"""Regenerate docs/console/*.png: a screenshot of each view of the live console.

Starts ``minikafka serve --admin-port``, opens the console in Debian's headless chromium, makes
the broker busy the way a failing integration test would (an idempotent producer, one open and
one committed transaction, a consumer group behind by a few records, a fault rule that fired)
and saves each view as it shows that state. Then the same for a cluster
(``serve --brokers 3``): a topic written with RF 3, one broker crashed, a leader moved, and the
cluster view saved as ``cluster.png``.

    .venv/bin/python -m bench.console_screenshots [--out docs/console]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from confluent_kafka import Consumer
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser_helpers import chromium
from tests.testkit.test_admin_http import http, produce, start_serve, stop_serve
from tests.txn_clients import ConfluentTxn

VIEWS = ("controls", "partitions", "producers", "transactions", "groups", "faults")


def shown(driver: object, css: str, text: str = "") -> None:
    """Wait (bounded) until an element matching ``css`` shows ``text``."""
    WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(  # re-rendered: read again
        lambda d: any(text in e.text for e in d.find_elements(By.CSS_SELECTOR, css)))  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "console")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="minikafka-console-") as tmp:
        served = start_serve(Path(tmp))
        try:
            with chromium(1300, 2400) as driver:  # tall: every view in sight, none scrolled while shot
                driver.get(served.admin + "/ui")
                shown(driver, "#connection", "live")
                http(served, "POST", "/topics", {"name": "orders", "partitions": 2})
                http(served, "POST", "/faults", {"id": "orders-not-leader", "action": "error_before", "api": "Produce",
                                                 "topic": "orders", "error": "NOT_LEADER_OR_FOLLOWER",
                                                 "trigger": "next:2"})
                http(served, "POST", "/faults", {"id": "slow-fetch", "action": "delay", "api": "Fetch",
                                                 "topic": "payments", "delay_ms": 50, "trigger": "always"})
                for burst in range(1, 5):  # a few steps, so the sparklines have a shape
                    assert produce(served.bootstrap, "orders", [b"order-%d" % i for i in range(burst * 3)]) == []
                    shown(driver, "#partitions", "orders-0")
                committed = ConfluentTxn(served.bootstrap, "payments-committed")
                committed.begin()
                committed.send("payments", 0, b"paid")
                committed.commit()
                open_txn = ConfluentTxn(served.bootstrap, "payments-open")
                open_txn.begin()
                open_txn.send("payments", 0, b"pending")
                consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "billing",
                                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 2})
                consumer.subscribe(["orders"])
                read = 0
                while read < 10:
                    message = consumer.poll(1)
                    if message is not None and message.error() is None:
                        read += 1
                consumer.commit(asynchronous=False)
                shown(driver, "#groups [data-offset]", "orders")
                assert produce(served.bootstrap, "orders", [b"late-%d" % i for i in range(6)]) == []
                latest = max(e["producer_id"] for p in http(served, "GET", "/partitions")[1]["partitions"]
                             for e in p["producers"])
                shown(driver, f"#producers tr[data-producer-id='{latest}']", "seq")  # the page has caught up
                shown(driver, "#transactions", "open")
                shown(driver, "#faults [data-rule-id='orders-not-leader'] .fired", "2")
                for view in VIEWS:
                    element = driver.find_element(By.ID, f"{view}-view")
                    element.screenshot(str(args.out / f"{view}.png"))
                    print(args.out / f"{view}.png")
                consumer.close()
                open_txn.abort()
        finally:
            stop_serve(served)
        cluster_view(Path(tmp) / "cluster", args.out)


def cluster_view(tmp: Path, out: Path) -> None:
    """``cluster.png``: three brokers, one of them crashed, its partitions led by the others, the
    replicas' log ends against the high watermark, one leader moved by hand."""
    served = start_serve(tmp, "--brokers", "3")
    try:
        with chromium(1300, 1200) as driver:
            driver.get(served.admin + "/ui")
            shown(driver, "#broker", "cluster of 3 brokers, 3 active")
            http(served, "POST", "/topics", {"name": "orders", "partitions": 3, "replication_factor": 3,
                                             "config": {"min.insync.replicas": "2"}})
            http(served, "POST", "/topics", {"name": "audit", "partitions": 1, "replication_factor": 2})
            plain = {"enable.idempotence": False, "acks": "all"}  # producer ids are per broker in a cluster yet
            assert produce(served.bootstrap, "orders", [b"order-%d" % i for i in range(30)], **plain) == []
            assert produce(served.bootstrap, "audit", [b"entry-%d" % i for i in range(5)], **plain) == []
            audit = http(served, "GET", "/topics/audit/0")[1]
            http(served, "POST", "/topics/audit/0/leader", {"broker": audit["replicas"][1]})
            http(served, "POST", "/brokers/3/crash")
            assert produce(served.bootstrap, "orders", [b"after-%d" % i for i in range(9)], **plain) == []
            # broker 2 cut off from the others: what its leaders take stays above the HW meanwhile
            http(served, "POST", "/brokers/2/isolate", {"from": "brokers"})
            assert produce(served.bootstrap, "orders", [b"alone-%d" % i for i in range(6)], **{**plain, "acks": "1"}) == []
            shown(driver, "#cluster tr[data-broker='3'] td.state", "down")
            labels = sorted(f"{r['broker']}: {r['log_end_offset']}" for p in http(served, "GET", "/cluster")[1]["partitions"]
                            for r in p["replica_offsets"])
            WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(  # caught up
                lambda d: sorted(e.text for e in d.find_elements(By.CSS_SELECTOR, "#cluster .bar:not(.down) .label"))
                == labels)
            driver.find_element(By.ID, "cluster-view").screenshot(str(out / "cluster.png"))
            print(out / "cluster.png")
    finally:
        stop_serve(served)


if __name__ == "__main__":
    main()
