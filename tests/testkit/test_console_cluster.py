"""The live console of a cluster in a real browser: ``minikafka serve --brokers 3 --admin-port``
in a child process, Debian's headless chromium driven by selenium, real Kafka clients.

The page's buttons and forms call the cluster endpoint's routes; every wait is on what the page
shows (bounded), and ``window.notReloaded`` proves no reload happened in between.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from tests.browser_helpers import chromium, console_errors
from tests.testkit.test_admin_http import Served, http, produce
from tests.testkit.test_cluster_admin_http import (
    NOT_IDEMPOTENT,
    cluster_served,  # noqa: F401  (the fixture "served")
    partition,
)
from tests.testkit.test_console import fill, not_reloaded, open_console, shows, waiting


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def open_cluster_console(browser: WebDriver, served: Served) -> None:
    open_console(browser, served, "cluster of 3 brokers, 3 active")


def cell(browser: WebDriver, name: str, column: str) -> str:
    """The text of one column of a partition's row in the cluster view."""
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#cluster table:nth-of-type(2) th")]
    cells = browser.find_elements(By.CSS_SELECTOR, f"#cluster tr[data-cluster-partition='{name}'] td")
    return cells[headers.index(column)].text if cells else ""


def broker_state(browser: WebDriver, node_id: int) -> str:
    cells = browser.find_elements(By.CSS_SELECTOR, f"#cluster tr[data-broker='{node_id}'] td.state")
    return cells[0].text if cells else ""


def press(browser: WebDriver, css: str) -> None:
    browser.find_element(By.CSS_SELECTOR, css).click()


def test_the_page_shows_three_brokers_and_each_replicas_log_end(browser: WebDriver, served: Served) -> None:
    http(served, "POST", "/topics", {"name": "orders", "partitions": 1, "replication_factor": 3})
    open_cluster_console(browser, served)
    assert produce(served.bootstrap, "orders", [b"%d" % i for i in range(7)], acks="all", **NOT_IDEMPOTENT) == []
    part = partition(served, "orders")
    waiting(browser).until(lambda d: cell(d, "orders-0", "HW") == "7", "the HW never reached 7 on the page")
    brokers = browser.find_elements(By.CSS_SELECTOR, "#cluster tr[data-broker]")
    assert [b.get_attribute("data-broker") for b in brokers] == ["1", "2", "3"]
    assert [broker_state(browser, n) for n in (1, 2, 3)] == ["active"] * 3
    controller = http(served, "GET", "/cluster")[1]["controller"]
    assert "(controller)" in browser.find_element(By.CSS_SELECTOR, f"#cluster tr[data-broker='{controller}']").text
    assert cell(browser, "orders-0", "leader") == str(part["leader"])
    assert cell(browser, "orders-0", "replicas") == ",".join(map(str, part["replicas"]))
    # one bar per replica, labelled with its broker and its log end: every one has all 7 records
    bars = "#cluster tr[data-cluster-partition='orders-0'] .bar .label"
    waiting(browser).until(lambda d: sorted(e.text for e in d.find_elements(By.CSS_SELECTOR, bars))
                           == ["1: 7", "2: 7", "3: 7"], "the replicas' log ends never showed 7")
    # the single broker's controls answer 409 in a cluster: hidden; the cluster's own are shown
    for hidden in ("#controls-view [data-single]", "#faults-view"):
        assert not any(e.is_displayed() for e in browser.find_elements(By.CSS_SELECTOR, hidden)), hidden
    assert browser.find_element(By.ID, "leader-form").is_displayed()
    assert not_reloaded(browser)
    assert console_errors(browser) == []


def test_crash_from_the_page_shows_the_broker_down_and_the_new_leader_and_start_brings_it_back(
        browser: WebDriver, served: Served) -> None:
    http(served, "POST", "/topics", {"name": "orders", "partitions": 1, "replication_factor": 3})
    assert produce(served.bootstrap, "orders", [b"a", b"b"], acks="all", **NOT_IDEMPOTENT) == []
    open_cluster_console(browser, served)
    old = partition(served, "orders")
    leader, epoch = old["leader"], old["leader_epoch"]
    shows(browser, "#cluster tr[data-cluster-partition='orders-0'] td.leader", str(leader))

    press(browser, f"#cluster tr[data-broker='{leader}'] button[data-post$='/crash']")
    waiting(browser).until(lambda d: broker_state(d, leader) == "down (fenced)", "the crashed broker never showed down")
    waiting(browser).until(lambda d: cell(d, "orders-0", "leader") not in ("", str(leader)),
                           "the page never showed a new leader")
    now = partition(served, "orders")
    assert now["leader"] != leader and now["leader_epoch"] > epoch
    waiting(browser).until(lambda d: cell(d, "orders-0", "leader") == str(now["leader"])
                           and cell(d, "orders-0", "epoch") == str(now["leader_epoch"]))
    shows(browser, "#cluster tr[data-cluster-partition='orders-0'] .bar.down", f"{leader}: down")
    shows(browser, "#broker", "2 active")

    press(browser, f"#cluster tr[data-broker='{leader}'] button[data-post$='/start']")
    waiting(browser).until(lambda d: broker_state(d, leader) == "active", "the restarted broker never showed active")
    shows(browser, "#broker", "3 active")
    shows(browser, "#broker", "1 crash(es), 1 restart(s)")
    # it catches up and rejoins the ISR: its bar shows the log end again
    shows(browser, "#cluster tr[data-cluster-partition='orders-0'] .bar .label", f"{leader}: 2")
    assert not_reloaded(browser)
    assert console_errors(browser) == []


def test_moving_a_leader_from_the_page_changes_it(browser: WebDriver, served: Served) -> None:
    http(served, "POST", "/topics", {"name": "moved", "partitions": 1, "replication_factor": 3})
    open_cluster_console(browser, served)
    first = partition(served, "moved")
    target = first["replicas"][1]
    # the row's button for another replica
    press(browser, f"#cluster tr[data-cluster-partition='moved-0'] button[data-body='{{\"broker\": {target}}}']")
    waiting(browser).until(lambda d: cell(d, "moved-0", "leader") == str(target), "the moved leader never showed")
    assert partition(served, "moved")["leader"] == target
    # the form, to a third one
    other = first["replicas"][2]
    form = browser.find_element(By.ID, "leader-form")
    fill(form, topic="moved", partition="0", broker=str(other))
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    waiting(browser).until(lambda d: cell(d, "moved-0", "leader") == str(other), "the form's move never showed")
    moved = partition(served, "moved")
    assert moved["leader"] == other and moved["leader_epoch"] == first["leader_epoch"] + 2
    assert not_reloaded(browser)
    assert console_errors(browser) == []


def test_bad_input_shows_the_cluster_endpoints_error_and_the_page_goes_on(browser: WebDriver,
                                                                        served: Served) -> None:
    http(served, "POST", "/topics", {"name": "kept", "partitions": 1, "replication_factor": 2})
    open_cluster_console(browser, served)
    form = browser.find_element(By.ID, "leader-form")
    submit = form.find_element(By.CSS_SELECTOR, "button[type=submit]")
    fill(form, topic="kept", partition="0", broker="9")
    submit.click()
    shows(browser, "#error", "404 no broker 9 (the cluster has brokers 1 to 3)")
    fill(form, topic="nope", broker="1")
    submit.click()
    shows(browser, "#error", "404 no partition nope-0")
    fill(form, topic="kept", partition="zero")
    submit.click()
    shows(browser, "#error", "400 partition must be a number, not 'zero'")
    # a broker that holds no replica of the partition cannot lead it
    part = partition(served, "kept")
    (outsider,) = {1, 2, 3} - set(part["replicas"])
    fill(form, partition="0", broker=str(outsider))
    submit.click()
    waiting(browser).until(lambda d: "POST /topics/kept/0/leader: 400" in d.find_element(By.ID, "error").text,
                           "the refused move's error never showed")
    topic_form = browser.find_element(By.ID, "topic-form")
    fill(topic_form, name="too-wide", replication_factor="4")
    topic_form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    shows(browser, "#error", "POST /topics: 400")
    # each answered an error, nothing changed, and the page is still live
    assert partition(served, "kept")["leader"] == part["leader"]
    http(served, "POST", "/topics", {"name": "after-errors", "partitions": 1, "replication_factor": 3})
    shows(browser, "#cluster", "after-errors-0")
    assert not_reloaded(browser)
