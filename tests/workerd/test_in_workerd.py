"""One pytest item per check of tests/workerd/checks.mjs, run against the real
`src/worker/entry.py` in real workerd by tests/workerd/harness.mjs (docs/pyodide.md, "The
real-workerd tier"), and the rules that keep its doubles few and documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT
from tests.import_graph import module_files
from tests.workerd.conftest import DOUBLES, WorkerdRun, check_ids

SRC = PROJECT_ROOT / "src"
# What cannot load in workerd offline: pydantic-core and numpy have no Pyodide 0.28 wheel.
UNLOADABLE = ("pydantic", "pydantic_core", "numpy")
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


def _doubled_modules() -> list[str]:
    """src/ modules the tier replaces (doubles at the same path as a real module)."""
    names = []
    for path in sorted(DOUBLES.rglob("*.py")):
        relative = path.relative_to(DOUBLES)
        if (SRC / relative).exists():
            names.append(".".join(relative.with_suffix("").parts))
    return names


def _runtime_imports(path: Path) -> list[str]:
    """Every module name `path` imports when it runs: at module level or inside functions
    (lazy imports run when a request needs them), not under `if TYPE_CHECKING:`. src/ uses
    absolute imports only."""

    def walk(node: ast.AST) -> list[str]:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return [name for child in node.orelse for name in walk(child)]
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if isinstance(node, ast.ImportFrom) and node.module:
            return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        return [name for child in ast.iter_child_nodes(node) for name in walk(child)]

    return walk(ast.parse(path.read_text(encoding="utf-8")))


def _reaches_unloadable(module: str) -> list[str] | None:
    """A chain of src/ imports from `module` to pydantic or numpy, if there is one."""
    files = module_files(SRC)
    parent: dict[str, str | None] = {module: None}
    queue = [module]
    while queue:
        current = queue.pop(0)
        names = _runtime_imports(files[current])
        hit = next((n for n in names if n.split(".")[0] in UNLOADABLE), None)
        if hit is not None:
            chain = [hit, current]
            while (step := parent[chain[-1]]) is not None:
                chain.append(step)
            return chain[::-1]
        for name in names:
            parts = name.split(".")
            for depth in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b too
                target = ".".join(parts[:depth])
                if target in files and target not in parent:
                    parent[target] = current
                    queue.append(target)
    return None


def test_only_modules_that_cannot_load_in_workerd_are_doubled() -> None:
    doubled = _doubled_modules()
    assert doubled, "the tier replaces at least the app"
    loadable = {name: _reaches_unloadable(name) for name in doubled}
    assert all(loadable.values()), (
        "these src/ modules load in workerd without pydantic or numpy, so the tier must run "
        f"them for real: {[name for name, chain in loadable.items() if chain is None]}"
    )


def test_every_double_and_every_check_is_listed_in_the_docs() -> None:
    section = DOCS.read_text(encoding="utf-8").split("## The real-workerd tier", 1)[-1]
    rows = set(re.findall(r"^\| `([\w./]+)` \|", section, flags=re.MULTILINE))
    doubles = {str(path.relative_to(DOUBLES)) for path in DOUBLES.rglob("*.py")}
    assert {row for row in rows if row.endswith(".py")} == doubles
    assert {row for row in rows if not row.endswith(".py")} == set(check_ids())


def test_nothing_in_src_imports_the_entry_by_its_package_path() -> None:
    """wrangler uploads `src/worker/entry.py` as the main module `entry.py` (and no
    `worker/entry.py`), as the tier does: an import of `worker.entry` would fail on
    Cloudflare."""
    importers = [
        name
        for name, path in module_files(SRC).items()
        if name != "worker.entry"
        and any(imported.startswith("worker.entry") for imported in _runtime_imports(path))
    ]
    assert importers == []
