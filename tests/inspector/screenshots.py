"""Take the screenshots in docs/inspector.md: `uv run python -m tests.inspector.screenshots`.

Seeds a tenant like the browser tests (temporary state folder, loopback server), opens each
view in Debian's Chromium and writes `docs/inspector/*.png`. Not a test: run it by hand
after changing the page, then look at the images.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.conftest import PROJECT_ROOT
from tests.inspector.browser import Inspector, chromium_driver, wait_for
from tests.inspector.conftest import serve_seeded
from tests.inspector.seed import SUBJECT


def _views(driver: webdriver.Chrome, page: Inspector, out: Path) -> list[Path]:
    written: list[Path] = []

    def save(name: str) -> None:
        path = out / f"{name}.png"
        driver.save_screenshot(str(path))
        written.append(path)

    page.wait_texts("#runs-list > li", lambda t: len(t) == 2)
    page.all("#runs-list > li button")[0].click()
    page.wait_texts("#run-detail .steps > li", lambda t: len(t) > 3)
    driver.execute_script("document.querySelector('#run-detail').scrollIntoView()")
    save("runs")
    page.tab("facts")
    page.wait_texts("#facts-list > li", lambda t: len(t) == 3)
    Select(page.css('#facts-filter select[name="status"]')).select_by_visible_text("superseded")
    page.css("#facts-filter button").click()
    page.wait_texts("#facts-list > li", lambda t: len(t) == 1)
    page.css("#facts-list > li button").click()
    wait_for(driver, lambda d: page.all("#fact-detail .successor"))
    save("facts")
    page.tab("recall")
    page.css('#recall-form input[name="query"]').send_keys(
        "how does Ada like to be contacted", Keys.ENTER
    )
    page.wait_texts("#recall-results > li", lambda t: len(t) >= 2)
    save("recall")
    page.tab("events")
    page.wait_texts("#events-list > li", lambda t: len(t) > 3)
    save("events")
    page.tab("brief")
    wait_for(driver, lambda d: page.all("#brief meter"))
    save("brief")
    page.tab("erase")
    page.css('#erase-form input[name="subject"]').send_keys(SUBJECT)
    page.css('#erase-form input[name="confirm"]').send_keys(SUBJECT)
    page.css("#erase-button").click()
    wait_for(driver, lambda d: page.css("#erase-report").text or None)
    save("erase")
    driver.set_window_size(390, 844)
    page.tab("facts")
    page.wait_texts("#facts-list > li", lambda t: len(t) >= 1)
    driver.find_element(By.CSS_SELECTOR, "body").send_keys(Keys.HOME)
    save("phone")
    return written


def shoot(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, serve_seeded(Path(tmp) / "state") as served:
        driver = chromium_driver(1280, 860)
        try:
            return _views(driver, Inspector(driver, served[0]).open(), out)
        finally:
            driver.quit()


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else PROJECT_ROOT / "docs" / "inspector"
    for path in shoot(target):
        print(f"{path} {path.stat().st_size} bytes")
