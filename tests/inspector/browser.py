"""Debian's Chromium driven by Selenium through Debian's `chromium-driver` (no download).

`chromium_driver()` starts headless Chromium at a given window size; `require_chromium`
skips outside CI and fails in CI when the packages are missing (`.ci/run` installs them).
`wait_for(driver, condition)` polls a condition until it holds (no fixed sleeps).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait

from tests.conftest import IN_CI
from tests.inspector.seed import TENANT, Seeded

T = TypeVar("T")
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/lib/chromium/chromium")
DRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
WAIT_SECONDS = 20


def _first(paths: tuple[str, ...], name: str) -> str | None:
    override = os.environ.get(name)
    if override:
        return override
    return next((p for p in paths if os.path.exists(p)), None)


def require_chromium() -> tuple[str, str]:
    browser = _first(CHROMIUM_CANDIDATES, "INSPECTOR_CHROMIUM") or shutil.which("chromium")
    driver = _first(DRIVER_CANDIDATES, "INSPECTOR_CHROMEDRIVER") or shutil.which("chromedriver")
    if browser is None or driver is None:
        reason = "Debian's chromium and chromium-driver are not installed"
        if IN_CI:
            pytest.fail(f"CI needs a browser for the inspector tests: {reason}")
        pytest.skip(reason)
    return browser, driver


def chromium_driver(width: int = 1280, height: int = 900) -> webdriver.Chrome:
    browser, driver = require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def wait_for(driver: webdriver.Chrome, condition: Callable[[webdriver.Chrome], T]) -> T:
    """Poll `condition` until it returns something truthy; its value is returned."""
    return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.05).until(condition)


class Inspector:
    """The page, driven the way a person uses it."""

    def __init__(self, driver: webdriver.Chrome, seeded: Seeded) -> None:
        self.d = driver
        self.seeded = seeded

    def open(self, *, token: bool = True) -> Inspector:
        self.d.get(f"{self.seeded.base}/admin/ui/")
        self.d.execute_script("sessionStorage.clear()")
        self.d.get(f"{self.seeded.base}/admin/ui/")
        if token:
            field = self.css("#token")
            field.send_keys(self.seeded.token)
            field.send_keys(Keys.ENTER)
            wait_for(self.d, lambda d: self.css("#tenant").get_attribute("value") == TENANT)
        return self

    def css(self, selector: str) -> WebElement:
        return self.d.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str) -> list[WebElement]:
        return self.d.find_elements(By.CSS_SELECTOR, selector)

    def texts(self, selector: str) -> list[str]:
        # Read in one script: a list being re-rendered never yields a stale element.
        found: list[str] = self.d.execute_script(
            "return [...document.querySelectorAll(arguments[0])]"
            ".filter(e => e.offsetParent !== null).map(e => e.innerText.trim())",
            selector,
        )
        return found

    def tab(self, name: str) -> None:
        self.css(f'.tabs [data-view="{name}"]').click()
        wait_for(self.d, lambda d: self.css(f"#view-{name}").is_displayed())

    def wait_texts(self, selector: str, predicate: Any) -> list[str]:
        def ready(_: webdriver.Chrome) -> list[str] | None:
            texts = self.texts(selector)
            return texts if predicate(texts) else None

        found: list[str] = wait_for(self.d, ready)
        return found
