"""The inspector as a person sees it, in Debian's Chromium (Selenium + chromium-driver).

A local server (the app `agent-memory dev` serves) on a free loopback port with a temp
state folder, a tenant seeded through the public routes (tests/inspector/seed.py), and the
page at /admin/ui/. Every wait is on a condition of the page, never a fixed sleep.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from local_runtime.runtime import LocalRuntime
from tests.inspector.browser import Inspector, chromium_driver, require_chromium, wait_for
from tests.inspector.seed import (
    FIRST_RUN,
    NEW_FACT,
    OLD_FACT,
    OTHER_FACT,
    SECOND_RUN,
    SUBJECT,
    TENANT,
    Seeded,
)
from tests.portability.conftest import Receiver, receiver

__all__ = ["receiver"]

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# Chromium and seeded server start once, not once per worker.
pytestmark = pytest.mark.xdist_group("inspector-browser")


@pytest.fixture(scope="module")
def driver() -> Iterator[webdriver.Chrome]:
    require_chromium()
    chrome = chromium_driver()
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture
def page(driver: webdriver.Chrome, seeded_server: Seeded) -> Inspector:
    return Inspector(driver, seeded_server)


def test_without_a_token_the_page_says_how_to_get_one(page: Inspector) -> None:
    page.open(token=False)
    status = wait_for(page.d, lambda d: page.css("#status").text or None)
    assert "access_token_missing" in status and "paste a token" in status
    page.css("#token-help summary").click()
    assert "uv run agent-memory token --email operator@localhost" in page.css("#token-help").text


def test_a_tenant_scoped_operator_picks_among_its_granted_tenants(page: Inspector) -> None:
    # Issue 26: the page's first call was platform-only; a scoped operator saw a 403 and
    # no tenant to pick. Now the picker offers its grants and the chosen tenant loads.
    token = page.seeded.operator("theo@example.com", TENANT, "globex")
    page.open(token=False)
    page.css("#token").send_keys(token, Keys.ENTER)
    wait_for(page.d, lambda d: len(page.all("#tenant option")) == 3)
    assert [o.text for o in page.all("#tenant option")] == ["(choose a tenant)", TENANT, "globex"]
    assert page.css("#status").text == "2 tenant(s) granted to you"
    Select(page.css("#tenant")).select_by_value(TENANT)
    runs = page.wait_texts("#runs-list > li", lambda t: len(t) == 2)
    assert SECOND_RUN in runs[0] and FIRST_RUN in runs[1]


def test_the_run_timeline_shows_the_runs_their_steps_and_recalled_episodes(
    page: Inspector,
) -> None:
    page.open()
    runs = page.wait_texts("#runs-list > li", lambda t: len(t) == 2)
    assert SECOND_RUN in runs[0] and FIRST_RUN in runs[1]  # newest first
    assert "1 recalled episode(s)" in runs[0] and "0 recalled episode(s)" in runs[1]
    with page.seeded.admin() as admin:
        first_run_id = admin.get(f"/admin/agents/{TENANT}/runs").json()["runs"][1]["run_id"]
        detail = admin.get(f"/admin/agents/{TENANT}/runs/{first_run_id}").json()
    first_episode = detail["episodes"][0]["episode_id"]
    page.all("#runs-list > li button")[0].click()
    steps = page.wait_texts("#run-detail .steps > li", lambda t: len(t) > 3)
    assert any("turn 2 starts" in s and SECOND_RUN in s for s in steps)
    assert any("tool working_memory_set ok" in s for s in steps)
    assert any("LLM step 1 → calls working_memory_set" in s for s in steps)
    assert steps[-1].endswith("turn ends: completed, 2 step(s), 1 tool call(s)")
    assert "Recalled episodes (1)" in page.css("#run-detail").text
    (recalled,) = page.texts("#run-detail .recalled li")
    assert recalled.startswith("outcome") and f"[{SUBJECT}] Input: {FIRST_RUN}" in recalled
    page.css(f'#run-detail .recalled li[data-episode-id="{first_episode}"] button').click()
    wait_for(page.d, lambda d: f"Run {first_run_id}" in page.css("#run-detail").text)
    assert "Recalled episodes (0)" in page.css("#run-detail").text


def test_a_superseded_fact_shows_its_successor_on_a_timeline(page: Inspector) -> None:
    page.open()
    page.tab("facts")
    page.wait_texts("#facts-list > li", lambda t: len(t) == 3)
    Select(page.css('#facts-filter select[name="status"]')).select_by_visible_text("superseded")
    page.css("#facts-filter button").click()
    (item,) = page.wait_texts("#facts-list > li", lambda t: len(t) == 1 and OLD_FACT in t[0])
    assert item.startswith("superseded")
    page.css("#facts-list > li button").click()
    successor = wait_for(page.d, lambda d: page.all("#fact-detail .successor"))[0]
    assert successor.text.startswith(f"Replaced by: {NEW_FACT}")
    words = page.css("#fact-detail").text.split()
    assert "null" not in words and "undefined" not in words
    chain = page.texts("#fact-detail .chain > li")
    assert len(chain) == 2
    assert "superseded" in chain[0] and OLD_FACT in chain[0] and "(this fact)" in chain[0]
    assert "active" in chain[1] and NEW_FACT in chain[1] and chain[1].split("\n")[0].endswith("now")
    history = page.texts("#fact-detail .history > li")
    assert any("memory_retrieved for “how does Ada like to be contacted”" in h for h in history)
    assert any("memory_written" in h for h in history)
    # Walk the chain forward: the successor's own view has the old fact before it.
    page.css("#fact-detail .chain > li:nth-child(2) button").click()
    wait_for(page.d, lambda d: "(this fact)" in page.texts("#fact-detail .chain > li")[1])
    assert page.css("#fact-detail").text.count("Replaced by") == 0
    assert f"Replaced: {OLD_FACT}" in page.css("#fact-detail").text


def test_the_recall_bars_match_the_apis_breakdown(page: Inspector) -> None:
    query = "Ada phone calls"
    with page.seeded.admin() as admin:
        api = admin.post(f"/admin/tenants/{TENANT}/recall/explain", json={"query": query})
    expected = api.json()["results"]
    assert expected, "the explain found nothing"
    page.open()
    page.tab("recall")
    page.css('#recall-form input[name="query"]').send_keys(query, Keys.ENTER)
    shown = page.wait_texts("#recall-results > li", lambda t: len(t) == len(expected))
    assert [s.split("\n")[0] for s in shown] == [
        f"#{r['rank']} {r['content']} score {r['score']:.4f}" for r in expected
    ]
    for item, result in zip(page.all("#recall-results > li"), expected, strict=True):
        total = item.find_element(By.CSS_SELECTOR, ".bars").rect["width"]
        for part, numbers in result["parts"].items():
            bar = item.find_element(By.CSS_SELECTOR, f'.bar[data-part="{part}"]')
            assert bar.rect["width"] / total == pytest.approx(numbers["weighted"], abs=0.004)
            row = item.find_element(By.CSS_SELECTOR, f'.parts-table tr[data-part="{part}"]')
            assert row.text.split()[-1] == f"{numbers['weighted']:.4f}"
        for channel, seen in result["channels"].items():
            row = item.find_element(By.CSS_SELECTOR, f'.channels tr[data-channel="{channel}"]')
            rank = str(seen["rank"] or "feature")
            assert row.text.split() == [channel, rank, f"{seen['raw']:.6f}"]


def test_events_are_a_filterable_stream(page: Inspector) -> None:
    with page.seeded.admin() as admin:
        events = admin.get(f"/admin/tenants/{TENANT}/events", params={"limit": 50}).json()
    page.open()
    page.tab("events")
    everything = page.wait_texts("#events-list > li", lambda t: len(t) == len(events["events"]))
    assert any("memory_written" in e for e in everything)
    Select(page.css('#events-filter select[name="kind"]')).select_by_visible_text(
        "memory_retrieved"
    )
    # Agent turns also record working and episodic reads (issue 16): narrow to semantic.
    Select(page.css('#events-filter select[name="tier"]')).select_by_visible_text("semantic")
    page.css("#events-filter button").click()
    (retrieved,) = page.wait_texts("#events-list > li", lambda t: len(t) == 1)
    assert "“how does Ada like to be contacted” → 3 result(s)" in retrieved


def test_the_brief_shows_gauges_against_80k_and_100k(page: Inspector) -> None:
    with page.seeded.admin() as admin:
        brief = admin.get(f"/admin/tenants/{TENANT}/lifecycle").json()["brief"]
    page.open()
    page.tab("brief")
    meter = wait_for(page.d, lambda d: page.all("#brief meter"))[0]
    assert float(meter.get_attribute("value") or -1) == brief["episodes"] == 2
    assert meter.get_attribute("max") == "100000" and meter.get_attribute("low") == "80000"
    text = page.css("#brief").text
    assert "Episodes: 2 of 100,000" in text and "warn 80,000" in text


def test_keyboard_only_and_phone_width(page: Inspector) -> None:
    page.d.set_window_size(390, 844)
    try:
        page.open()
        page.css('.tabs [data-view="runs"]').send_keys(Keys.ARROW_RIGHT)
        wait_for(page.d, lambda d: page.css("#view-facts").is_displayed())
        assert page.d.switch_to.active_element.text == "Facts"
        page.wait_texts("#facts-list > li", lambda t: len(t) == 3)
        page.css("#facts-list > li button").send_keys(Keys.ENTER)
        detail = wait_for(page.d, lambda d: page.css("#fact-detail").text or None)
        assert page.d.switch_to.active_element.get_attribute("id") == "fact-detail"
        assert "What was believed when" in detail
        overflow = page.d.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth"
        )
        assert overflow <= 0, f"the page scrolls sideways by {overflow}px at phone width"
    finally:
        page.d.set_window_size(1280, 900)


def test_erase_needs_the_typed_subject_and_removes_it_from_every_view(
    driver: webdriver.Chrome, fresh_server: tuple[Seeded, LocalRuntime]
) -> None:
    seeded, _runtime = fresh_server
    page = Inspector(driver, seeded).open()
    page.tab("events")
    before = page.wait_texts("#events-list > li", lambda t: len(t) >= 1)
    assert any(f"[{SUBJECT}]" in e for e in before)
    page.tab("erase")
    page.css('#erase-form input[name="subject"]').send_keys(SUBJECT)
    page.css('#erase-form input[name="confirm"]').send_keys(SUBJECT[:-1])
    button = page.css("#erase-button")
    assert not button.is_enabled()
    page.css('#erase-form input[name="confirm"]').send_keys(SUBJECT[-1])
    wait_for(driver, lambda d: button.is_enabled())
    button.click()
    report = wait_for(driver, lambda d: page.css("#erase-report").text or None)
    assert f"Erased “{SUBJECT}” from {TENANT}" in report and "Complete in every tier." in report
    rows = {r.get_attribute("data-key"): r.text.split()[-1] for r in page.all("#erase-report tr")}
    # Both Ada facts go; the superseded one had no vector left (the reconciler drops it).
    assert rows["facts"] == "2" and rows["vectors"] == "1" and int(rows["episodes"]) >= 1

    page.tab("facts")
    (left,) = page.wait_texts("#facts-list > li", lambda t: len(t) == 1)
    assert OTHER_FACT in left
    # The runs and events tabs still show their lists from before the erase until their
    # refresh lands: wait for the refreshed lists (they never come if nothing was erased).
    page.tab("runs")
    page.wait_texts("#runs-list > li", lambda t: t and not any(FIRST_RUN in r for r in t))
    page.tab("events")
    page.wait_texts("#events-list > li", lambda t: t and not any(SUBJECT in e for e in t))
    page.tab("recall")
    page.css('#recall-form input[name="query"]').send_keys("Ada phone email", Keys.ENTER)
    results = page.wait_texts("#recall-results > li", lambda t: len(t) >= 1)
    assert not any("Ada" in r for r in results)


def test_exports_and_webhook_deliveries_show_their_progress(
    driver: webdriver.Chrome, fresh_server: tuple[Seeded, LocalRuntime], receiver: Receiver
) -> None:
    seeded, _runtime = fresh_server
    with seeded.admin() as admin:
        added = admin.post(f"/admin/tenants/{TENANT}/webhooks", json={"url": receiver.url})
        assert added.status_code == 201, added.text
    # A write: the dev server's loop delivers its change to the endpoint.
    seeded.mcp(
        "store_memory", {"content": "Bo prefers the blue mug", "metadata": {"subject": "bo"}}
    )
    page = Inspector(driver, seeded).open()
    page.tab("portability")
    page.css("#export-start").click()

    def shown(_: webdriver.Chrome) -> bool:
        page.tab("runs")  # back and forth: the tab reloads both tables
        page.tab("portability")
        done = page.texts('#exports tr[data-status="complete"]')
        return bool(done and page.texts('#deliveries tr[data-status="delivered"]'))

    wait_for(driver, shown)
    [done] = page.texts('#exports tr[data-status="complete"]')
    assert "complete" in done
    delivered = page.texts('#deliveries tr[data-status="delivered"]')
    assert all("memory." in row and "200" in row for row in delivered)
    sent = [json.loads(body)["data"].get("key", "") for _, body in receiver.received]
    assert "bo|states" in sent
    page.css("#webhooks button").click()  # pause it
    wait_for(driver, lambda d: "paused" in page.css("#webhooks").text)
