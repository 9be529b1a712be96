"""One pytest item per in-Pyodide test (tests/pyodide/py/test_*.py), run in real Pyodide
against real workerd bindings by tests/pyodide/harness.mjs (see docs/pyodide.md)."""

from __future__ import annotations

import pytest

from tests.pyodide.conftest import PyodideRun, in_pyodide_ids


@pytest.mark.parametrize("test_id", in_pyodide_ids())
def test_in_pyodide(test_id: str, pyodide_run: PyodideRun) -> None:
    if pyodide_run.failure is not None:
        pytest.fail(pyodide_run.failure, pytrace=False)
    assert pyodide_run.results is not None
    result = pyodide_run.results.get(test_id)
    if result is None:
        pytest.fail(f"{test_id} did not run in Pyodide", pytrace=False)
    if result["outcome"] != "passed":
        pytest.fail(
            f"{test_id} {result['outcome']} in Pyodide {pyodide_run.versions.get('pyodide')}: "
            f"{result['message']}\n{result['traceback']}",
            pytrace=False,
        )
