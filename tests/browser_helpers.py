"""Debian's headless chromium driven through selenium, for the live console's tests and screenshots.

chromium and chromium-driver are installed from Debian's packages when missing (the test
machines run as root), the way tests/test_kcat.py installs kcat. The browser's console log is
kept (``goog:loggingPrefs``) so a test can assert the page logged no error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

APT_LIB = Path(__file__).resolve().parent / "container" / "lib.sh"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: flags that run chromium as root, headless, without reaching out to the internet
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")


def install_chromium() -> None:
    """chromium and its driver from Debian's packages, unless the driver (which needs chromium) is
    there: the scripts' apt_need, which runs apt-get update first and waits for a lock another
    apt-get or dpkg holds."""
    if os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM):
        return
    subprocess.run(["bash", "-c", '. "$0" && apt_need chromedriver chromium chromium-driver', str(APT_LIB)],
                   check=True, timeout=1500, stdout=subprocess.DEVNULL)
    assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), "chromium could not be installed"


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[webdriver.Chrome]:
    """A headless chromium with a fresh profile, closed (and its profile removed) afterwards."""
    install_chromium()
    profile = tempfile.mkdtemp(prefix="minikafka-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """The browser console's errors since the last call (the log is drained as it is read)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
