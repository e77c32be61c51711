"""The live console in a real browser: Debian's headless chromium, driven by selenium, against
``minikafka serve --admin-port`` in a child process and real Kafka clients.

Every wait is on something the page shows (WebDriverWait, bounded); nothing reloads the page
unless a test says so, and a marker set on ``window`` proves it did not.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.browser_helpers import chromium, console_errors
from tests.testkit.test_admin_http import Served, http, produce, start_serve, stop_serve
from tests.testkit.test_console_json import partition, plain_served  # noqa: F401  (plain_served: the fixture "served")
from tests.txn_clients import ConfluentTxn

WAIT = 30  # seconds any one page condition may take (snapshots come every 0.5 s)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def open_console(browser: WebDriver, served: Served, header: str = "running") -> None:
    """Open the page, wait until it is live and its header shows ``header``, and mark the window
    so that a reload would show."""
    browser.get(served.admin + "/ui")
    shows(browser, "#connection", "live")
    shows(browser, "#broker", header)
    console_errors(browser)  # drain what an earlier test left
    browser.execute_script("window.notReloaded = true")


def waiting(browser: WebDriver) -> WebDriverWait[WebDriver]:
    """A bounded wait that reads again when the page re-rendered an element under it."""
    return WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,))


def shows(browser: WebDriver, css: str, text: str) -> None:
    """Wait until an element matching ``css`` contains ``text``."""
    waiting(browser).until(lambda d: any(text in e.text for e in d.find_elements(By.CSS_SELECTOR, css)),
                           f"{css} never showed {text!r}")


def not_reloaded(browser: WebDriver) -> bool:
    return browser.execute_script("return window.notReloaded === true") is True


def partition_cell(browser: WebDriver, name: str, column: str) -> str:
    """The text of one column of a partition's row in the partitions view."""
    headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#partitions th")]
    cells = browser.find_elements(By.CSS_SELECTOR, f"#partitions tr[data-partition='{name}'] td")
    return cells[headers.index(column)].text if cells else ""


def fill(form: object, **values: str) -> None:
    for name, value in values.items():
        field = form.find_element(By.NAME, name)  # type: ignore[attr-defined]
        if field.tag_name == "select":
            Select(field).select_by_visible_text(value)
        else:
            field.clear()
            field.send_keys(value)


def test_the_page_loads_with_its_views_and_no_console_errors(browser: WebDriver, served: Served) -> None:
    http(served, "POST", "/topics", {"name": "first", "partitions": 2})
    browser.get(served.admin + "/")
    shows(browser, "#connection", "live")
    shows(browser, "#broker", "running")
    shows(browser, "#partitions tr[data-partition='first-1']", "first-1")
    for view in ("controls", "partitions", "producers", "transactions", "groups", "faults"):
        assert browser.find_element(By.ID, f"{view}-view").is_displayed(), view
    # one broker, no GET /cluster yet: the cluster view stays hidden
    assert not browser.find_element(By.ID, "cluster-view").is_displayed()
    assert console_errors(browser) == []


def test_a_producers_id_and_window_appear_without_a_reload(browser: WebDriver, served: Served) -> None:
    http(served, "POST", "/topics", {"name": "live", "partitions": 1})
    open_console(browser, served)
    assert produce(served.bootstrap, "live", [b"a", b"b", b"c"]) == []  # three batches, one producer
    (producer_id,) = http(served, "GET", "/topics/live/0")[1]["producers"]
    row = f"#producers tr[data-producer-id='{producer_id}'][data-partition='live-0']"
    window = ["seq 0–0 @0–0", "seq 1–1 @1–1", "seq 2–2 @2–2", "·", "·"]  # three batches, two empty slots
    waiting(browser).until(lambda d: [b.text.replace("\n", " ") for b in
                                      d.find_elements(By.CSS_SELECTOR, f"{row} .batch")] == window)
    shows(browser, "#partitions tr[data-partition='live-0']", "3")
    assert not_reloaded(browser)
    assert console_errors(browser) == []


def test_a_fault_rule_added_from_the_form_fires_and_its_count_rises(browser: WebDriver, served: Served) -> None:
    http(served, "POST", "/topics", {"name": "guarded", "partitions": 1})
    open_console(browser, served)
    form = browser.find_element(By.ID, "fault-form")
    fill(form, action="error_before", api="Produce", topic="guarded", trigger="next:1",
         error="NOT_LEADER_OR_FOLLOWER")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    waiting(browser).until(lambda d: http(served, "GET", "/faults")[1]["rules"])
    (rule,) = http(served, "GET", "/faults")[1]["rules"]
    assert (rule["action"], rule["api"], rule["topic"], rule["trigger"], rule["n"], rule["error_name"]) == \
        ("error_before", ["Produce"], "guarded", "next", 1, "NOT_LEADER_OR_FOLLOWER")
    fired = f"#faults tr[data-rule-id='{rule['id']}'] .fired"
    shows(browser, fired, "0")
    assert produce(served.bootstrap, "guarded", [b"x"]) == []  # the client retries past the error
    shows(browser, fired, "1")
    assert http(served, "GET", f"/faults/{rule['id']}")[1]["fired"] == 1
    browser.find_element(By.CSS_SELECTOR, f"#faults tr[data-rule-id='{rule['id']}'] button").click()
    shows(browser, "#faults", "no rules")
    assert http(served, "GET", "/faults")[1]["rules"] == []
    assert not_reloaded(browser)


def test_the_control_buttons_roll_a_segment_and_expire_producers(browser: WebDriver, served: Served) -> None:
    assert produce(served.bootstrap, "controlled", [b"1", b"2"]) == []
    open_console(browser, served)
    shows(browser, "#producers tr[data-partition='controlled-0']", "seq 1–1")
    form = browser.find_element(By.ID, "partition-form")
    fill(form, topic="controlled", partition="0")
    form.find_element(By.CSS_SELECTOR, "button[data-path='/broker/roll']").click()
    waiting(browser).until(lambda d: partition_cell(d, "controlled-0", "segments") == "2")
    assert partition(served, "controlled-0")["segments"] == 2
    form.find_element(By.CSS_SELECTOR, "button[data-path='/broker/expire-producers']").click()
    shows(browser, "#producers", "no producers yet")
    assert partition(served, "controlled-0")["producers"] == []
    assert console_errors(browser) == []


def test_bad_input_to_a_form_shows_the_endpoints_error_and_the_page_goes_on(browser: WebDriver,
                                                                           served: Served) -> None:
    open_console(browser, served)
    json_form = browser.find_element(By.ID, "fault-json-form")
    fill(json_form, json='{"action": "explode"}')
    json_form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    shows(browser, "#error", "400 action must be one of")
    form = browser.find_element(By.ID, "fault-form")
    fill(form, trigger="sometimes")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    shows(browser, "#error", "trigger must be one of")
    partition_form = browser.find_element(By.ID, "partition-form")
    fill(partition_form, topic="no-such-topic")
    partition_form.find_element(By.CSS_SELECTOR, "button[data-path='/broker/roll']").click()
    shows(browser, "#error", "404 no partition matches topic no-such-topic")
    # the endpoint answered each with an error and the page is still live
    assert http(served, "GET", "/faults")[1]["rules"] == []
    http(served, "POST", "/topics", {"name": "after-errors", "partitions": 1})
    shows(browser, "#partitions", "after-errors-0")
    assert not_reloaded(browser)


def test_a_transaction_shows_as_open_then_as_committed(browser: WebDriver, served: Served) -> None:
    open_console(browser, served)
    txn = ConfluentTxn(served.bootstrap, "console-txn")
    try:
        txn.begin()
        txn.send("paid", 0, b"1")
        row = "#transactions tr[data-transactional-id='console-txn']"
        shows(browser, f"{row}[data-state='Ongoing']", "open")
        shows(browser, row, "paid-0")
        shows(browser, "#producers tr[data-partition='paid-0']", "open from 0")
        txn.commit()
        shows(browser, f"{row}[data-state='CompleteCommit']", "committed")
    finally:
        txn.close()
    assert not_reloaded(browser)


def test_the_page_survives_a_broker_restart_and_a_new_process(browser: WebDriver, tmp_path: Path) -> None:
    with socket.socket() as sock:  # a free port the second process can take again
        sock.bind(("127.0.0.1", 0))
        admin_port = sock.getsockname()[1]
    served = start_serve(tmp_path, "--admin-port", str(admin_port))
    try:
        open_console(browser, served)
        browser.find_element(By.CSS_SELECTOR, "button[data-body='{\"clean\": false}']").click()
        shows(browser, "#broker", "1 crash(es), 1 restart(s)")
        shows(browser, "#broker", "running")
        stop_serve(served)
        shows(browser, "#connection", "reconnecting")
        served = start_serve(tmp_path, "--admin-port", str(admin_port))
        shows(browser, "#connection", "live")
        shows(browser, "#broker", "0 crash(es), 0 restart(s)")
        assert produce(served.bootstrap, "after-restart", [b"1"]) == []
        shows(browser, "#partitions", "after-restart-0")
        assert not_reloaded(browser)
    finally:
        if served.process.poll() is None:
            stop_serve(served)
