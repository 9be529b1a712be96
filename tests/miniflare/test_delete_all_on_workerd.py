"""The subject erase wipes an agent instance named after the subject with `storage.deleteAll()`
(issue 26). Proven on workerd's own Durable Object SQLite (Miniflare, storage persisted to a
folder we can read): a DELETE leaves the text in the object's SQLite files (workerd has no
`secure_delete`), `deleteAll()` leaves it in none of them, unsets the alarm (compatibility
date 2026-02-24 or later: ours is wrangler.toml's) and the object works on after it.

And every other instance an erase reaches (issue 47): rows overwritten and deleted in place
still leave copies in pages SQLite rebalanced, which a checkpoint writes into the database
file; `deleteAll()` with the surviving rows written back before the next await (what
`AgentRuntimeCore.rebuild` does through `replace_all`) leaves no copy, keeps the survivors
and the alarm, also after workerd restarts on the same folder."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT, require_node_tools
from tests.miniflare.session import compatibility_date

NEEDLE = "subject-zq7xkw-ada"


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What each step of the probe observed (one workerd run for the module's tests)."""
    require_node_tools()
    folder = tmp_path_factory.mktemp("do-persist")
    run = subprocess.run(
        [
            "node",
            str(PROJECT_ROOT / "tests" / "miniflare" / "delete_all_probe.mjs"),
            str(folder),
            NEEDLE,
            compatibility_date(),
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    seen: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    assert "error" not in seen, seen["error"]
    return seen


def test_delete_all_leaves_no_byte_of_the_object_and_no_alarm(seen: dict[str, Any]) -> None:
    assert seen["written"]["alarm"] is not None and seen["files_after_write"]
    # The residue a plain DELETE leaves (why the erase overwrites rows before deleting).
    assert seen["files_after_delete"], "workerd's DELETE left nothing: the probe proves nothing"
    assert seen["delete_all"] == {"tables": [], "alarm": None}
    assert seen["files_after_delete_all"] == []
    assert seen["reused"]["tables"] == ["notes"]  # the object continues, empty
    assert seen["files_after_reuse"] == [] and seen["files_after_dispose"] == []


def test_a_rebuilt_object_keeps_its_other_rows_and_no_copy_of_the_erased_ones(
    seen: dict[str, Any],
) -> None:
    # Issue 47: what the subject erase does to each instance (AgentRuntimeCore.rebuild).
    assert seen["filled"]["rows"] == 60 and seen["erased"]["rows"] == 40
    # Overwritten in place and deleted, the rows still left copies in pages SQLite rebuilt:
    # in the database file itself once its write-ahead log was checkpointed.
    assert any(f.endswith(".sqlite") for f in seen["files_after_erase"]), seen

    # deleteAll() empties the database at once; the rows written before the next await
    # are kept, in the same commit, and no copy of the erased rows is left.
    assert seen["rebuilt"] == {"schema_after_delete": 0, "rows": 40}
    assert seen["files_after_rebuild"] == [] and seen["kept_in_files_after_rebuild"]
    assert seen["after_restart"]["rows"] == 40 and seen["after_restart"]["alarm"] is not None
