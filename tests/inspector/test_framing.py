"""Issue 26, finding 2, as a browser sees it: a page of another origin frames the inspector
and Chromium refuses to render it (CSP `frame-ancestors 'none'`, `X-Frame-Options: DENY`).

Two loopback origins: the dev server (the inspector) and a second server on another port
(the "attacker"), whose page holds two iframes: the inspector, and a page of its own as the
control that framing itself works. Each wait is on a condition of the page (no sleeps).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server, serving_in_thread
from tests.fakes.embedder import HashingEmbedder
from tests.inspector.browser import chromium_driver, require_chromium, wait_for

CONTROL = b"<!doctype html><title>control</title><p id='framed'>framed fine</p>"


def attacker_app(inspector: str) -> Any:
    """An ASGI app for the second origin: `/` frames the inspector and `/control`."""
    page = (
        "<!doctype html><title>attacker</title>"
        f"<iframe id='victim' src='{inspector}/admin/ui/' width='600' height='400'></iframe>"
        "<iframe id='control' src='/control' width='300' height='100'></iframe>"
    ).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = CONTROL if scope["path"] == "/control" else page
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/html; charset=utf-8")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.fixture
def driver() -> Iterator[webdriver.Chrome]:
    require_chromium()
    chrome = chromium_driver()
    try:
        yield chrome
    finally:
        chrome.quit()


def _frame_document(driver: webdriver.Chrome, frame_id: str) -> tuple[str, bool]:
    """The URL the frame shows and whether it holds the inspector's token field."""
    driver.switch_to.default_content()
    driver.switch_to.frame(driver.find_element(By.ID, frame_id))
    try:
        found: tuple[str, bool] = driver.execute_script(
            "return [location.href, document.readyState === 'complete' ? "
            "!!document.querySelector('#token') : null]"
        )
        return found
    finally:
        driver.switch_to.default_content()


def test_another_origin_cannot_frame_the_inspector(driver: webdriver.Chrome, tmp_path: Any) -> None:
    runtime = LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder())
    with running_server(runtime) as inspector:
        # The same page loads fine on its own.
        driver.get(f"{inspector}/admin/ui/")
        assert driver.find_element(By.ID, "token").is_displayed()
        with serving_in_thread(attacker_app(inspector), lifespan="off") as attacker:
            assert attacker.rsplit(":", 1)[1] != inspector.rsplit(":", 1)[1]
            driver.get(f"{attacker}/")

            def control_loaded(d: webdriver.Chrome) -> bool:
                d.switch_to.frame(d.find_element(By.ID, "control"))
                try:
                    return bool(d.find_elements(By.ID, "framed"))
                finally:
                    d.switch_to.default_content()

            wait_for(driver, control_loaded)  # framing works: this origin frames itself

            def victim_settled(d: webdriver.Chrome) -> tuple[str, bool] | None:
                href, has_token = _frame_document(d, "victim")
                if href.startswith("chrome-error://"):
                    return href, False  # Chromium refused to render it
                return (href, True) if has_token else None

            href, rendered = wait_for(driver, victim_settled)
            assert not rendered, f"the inspector rendered inside {attacker}: {href}"
            assert href.startswith("chrome-error://")
