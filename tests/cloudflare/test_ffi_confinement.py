"""Only the Cloudflare adapters and the Worker entry may speak FFI (DESIGN: layers).

Walks every module under src/ with `ast` (nothing is imported): `js`, `pyodide` and the
runtime-private `_pyodide_*`/`_cloudflare_*` modules may be imported only by
src/bindings/cloudflare/* and src/worker/entry.py; `workers` only by src/worker/entry.py; and
nothing but the entry imports the Cloudflare adapters themselves.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.import_graph import import_nodes

SRC = Path(__file__).resolve().parents[2] / "src"
ENTRY = "worker/entry.py"
FFI_MODULES = ("js", "pyodide", "_pyodide_entrypoint_helper", "_cloudflare_compat_flags")


def imported_modules(path: Path) -> set[str]:
    """Absolute module names imported by `path`, including `importlib.import_module("x")`."""
    names: set[str] = set()
    for node in import_nodes(path):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def is_under(name: str, root: str) -> bool:
    return name == root or name.startswith(root + ".")


def modules() -> list[tuple[str, set[str]]]:
    return [
        (path.relative_to(SRC).as_posix(), imported_modules(path))
        for path in sorted(SRC.rglob("*.py"))
    ]


def test_the_walk_sees_the_ffi_modules() -> None:
    found = dict(modules())
    assert "workers" in found[ENTRY]
    assert "js" in found["bindings/cloudflare/ffi.py"]
    assert len(found) > 20


@pytest.mark.parametrize("root", FFI_MODULES)
def test_only_adapters_and_entry_import_js_or_pyodide(root: str) -> None:
    offenders = [
        rel
        for rel, names in modules()
        if any(is_under(n, root) for n in names)
        and not (rel.startswith("bindings/cloudflare/") or rel == ENTRY)
    ]
    assert offenders == []


def test_only_the_entry_imports_workers() -> None:
    offenders = [
        rel
        for rel, names in modules()
        if any(is_under(n, "workers") for n in names) and rel != ENTRY
    ]
    assert offenders == []


def test_only_the_entry_imports_the_cloudflare_adapters() -> None:
    offenders = [
        rel
        for rel, names in modules()
        if any(is_under(n, "bindings.cloudflare") for n in names)
        and not (rel.startswith("bindings/cloudflare/") or rel == ENTRY)
    ]
    assert offenders == []
