"""One pytest item per check of tests/workerd/checks.mjs, run against the whole Worker in real
workerd by tests/workerd/harness.mjs (docs/pyodide.md, "The real-workerd tier"), and the rules
that keep the tier honest: numpy is the one Python double, the date's flags are accounted for,
and every check is listed in the docs."""

from __future__ import annotations

import re

import pytest

from tests.conftest import PROJECT_ROOT
from tests.workerd.conftest import (
    NEWEST_TIER_DATE,
    STANDS_IN_FOR,
    WorkerdRun,
    check_ids,
    tier_date,
    vendored_paths,
)

DOCS = PROJECT_ROOT / "docs" / "pyodide.md"


@pytest.mark.xdist_group("workerd")
@pytest.mark.parametrize("check_id", check_ids())
def test_in_workerd(check_id: str, workerd_run: WorkerdRun) -> None:
    if workerd_run.failure is not None:
        pytest.fail(workerd_run.failure, pytrace=False)
    if check_id not in workerd_run.registered:
        pytest.fail(f"{check_id} is not a check the harness knows", pytrace=False)
    result = workerd_run.results.get(check_id)
    if result is None:
        pytest.fail(f"{check_id} did not run in workerd", pytrace=False)
    if result["outcome"] != "passed":
        pytest.fail(
            f"{check_id} failed in workerd:\n{result['message']}\n"
            f"--- harness stderr (last lines) ---\n{workerd_run.stderr[-4000:]}",
            pytrace=False,
        )


def test_numpy_is_the_only_python_double() -> None:
    """Everything vendored is the real package (pydantic from its emscripten wheel), but numpy."""
    vendored = vendored_paths()
    stubs = [name for name, path in vendored.items() if "tests" in path.split("/site-packages")[0]]
    assert stubs == ["numpy.py"], stubs
    assert {"pydantic", "pydantic_core", "workers", "httpx"} <= set(vendored)


def test_the_tier_runs_every_flag_of_the_deployed_date() -> None:
    """The tier's date is the deployed one, or workerd's newest when that is earlier: then
    the only flag the days between turn on must be the one the dev bundle stands in for."""
    deployed = _wrangler_date()
    flag, date = STANDS_IN_FOR
    assert tier_date(deployed) == min(deployed, NEWEST_TIER_DATE)
    assert deployed >= date, f"{flag} ({date}) is what the dev bundle stands in for"
    flags = _flag_table()
    between = {name for name, on in flags.items() if tier_date(deployed) < on <= deployed}
    assert between == {flag}, between


def test_every_check_and_every_flag_is_listed_in_the_docs() -> None:
    section = DOCS.read_text(encoding="utf-8").split("## The real-workerd tier", 1)[-1]
    rows = set(re.findall(r"^\| `([\w./]+)` \|", section, flags=re.MULTILINE))
    assert set(check_ids()) <= rows, set(check_ids()) - rows
    assert _flag_table(), "docs/pyodide.md lists the flags turned on since the old date"


def _wrangler_date() -> str:
    match = re.search(
        r'^compatibility_date = "([\d-]+)"', (PROJECT_ROOT / "wrangler.toml").read_text(), re.M
    )
    assert match is not None
    return match.group(1)


def _flag_table() -> dict[str, str]:
    """docs/pyodide.md's table of the flags the move to 3.14 turns on: flag -> date."""
    text = DOCS.read_text(encoding="utf-8").split("### Compatibility flags", 1)[-1]
    return dict(re.findall(r"^\| `(\w+)` \| (\d{4}-\d\d-\d\d) \|", text, flags=re.MULTILINE))
