"""The subject erase wipes an agent instance named after the subject with `storage.deleteAll()`
(issue 26). Proven on workerd's own Durable Object SQLite (Miniflare, storage persisted to a
folder we can read): a DELETE leaves the text in the object's SQLite files (workerd has no
`secure_delete`), `deleteAll()` leaves it in none of them, unsets the alarm (compatibility
date 2026-02-24 or later: ours is wrangler.toml's) and the object works on after it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import PROJECT_ROOT, require_node_tools
from tests.miniflare.session import compatibility_date

NEEDLE = "subject-zq7xkw-ada"


def test_delete_all_leaves_no_byte_of_the_object_and_no_alarm(tmp_path: Path) -> None:
    require_node_tools()
    probe = subprocess.run(
        [
            "node",
            str(PROJECT_ROOT / "tests" / "miniflare" / "delete_all_probe.mjs"),
            str(tmp_path),
            NEEDLE,
            compatibility_date(),
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    assert "error" not in seen, seen["error"]
    assert seen["written"]["alarm"] is not None and seen["files_after_write"]
    # The residue a plain DELETE leaves (why the erase overwrites rows before deleting).
    assert seen["files_after_delete"], "workerd's DELETE left nothing: the probe proves nothing"
    assert seen["delete_all"] == {"tables": [], "alarm": None}
    assert seen["files_after_delete_all"] == []
    assert seen["reused"]["tables"] == ["notes"]  # the object continues, empty
    assert seen["files_after_reuse"] == [] and seen["files_after_dispose"] == []
