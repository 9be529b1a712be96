"""The project's import graph, read with `ast` (nothing is imported or run).

Follows `import x.y` and `from x import y` (absolute and relative, at any depth in the file,
including imports under `if TYPE_CHECKING:` and inside functions, so a lazy import cannot
hide an edge), and route handlers named by string (`LazyHandler("module:attribute")`),
which import their module on first use. Importing `a.b.c` runs `a/__init__` and
`a/b/__init__` too, so parents are edges as well. Third-party and stdlib modules are
leaves. Used by the hot-path isolation test and the layout test (`cycles`: no import
circle); `import_time_closure` (module-level imports only) by the start-up test
(tests/core/test_startup_imports.py).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable
from functools import cache
from pathlib import Path


def module_files(root: Path) -> dict[str, Path]:
    """Module name → file for every .py under `root` (packages by their __init__).

    Hidden folders are not the project's: tests/mcp_sdk/.venv (the MCP SDK client's own
    environment, created by its tests) holds ~700 third-party files, which tripled the
    layout test's walk and are no module of ours."""
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if any(part.startswith(".") for part in parts):
            continue
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            modules[".".join(parts)] = path
    return modules


def import_nodes(path: Path) -> tuple[ast.Import | ast.ImportFrom | ast.Call, ...]:
    """The nodes of `path` that can import (`import`, `from ... import`, and calls: a lazy
    handler, `importlib.import_module`), in `ast.walk` order, found once per test process:
    the layout, FFI and start-up tests each walk all of src/ (~0.5 s a walk, most of it
    `ast.walk`). Keyed by the file's modification time and size too, so an edited or
    planted file is read again. Shared: callers read the nodes, never change them."""
    stat = path.stat()
    return _import_nodes(path, stat.st_mtime_ns, stat.st_size)


@cache
def _import_nodes(
    path: Path, mtime_ns: int, size: int
) -> tuple[ast.Import | ast.ImportFrom | ast.Call, ...]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return tuple(n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom | ast.Call))


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `module` imports (directly), resolved to full names."""
    return _resolve(module, path, import_nodes(path), known, lazy_handlers=True)


# A route handler named by string (`worker.app.LazyHandler("module:attribute")`, or the
# app's `lazy(...)`) imports its module on the route's first request: an edge like any
# lazy import, invisible to `import` statements.
LAZY_HANDLER_CALLS = frozenset({"LazyHandler", "lazy"})


def _lazy_handler_module(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Subscript):  # LazyHandler[Bindings](...)
        func = func.value
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in LAZY_HANDLER_CALLS or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and ":" in first.value:
        return first.value.partition(":")[0]
    return None


def _resolve(
    module: str, path: Path, walked: Iterable[ast.AST], known: set[str], *, lazy_handlers: bool
) -> set[str]:
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in walked:
        targets: list[str] = []
        if lazy_handlers and isinstance(node, ast.Call):
            lazy_module = _lazy_handler_module(node)
            targets = [lazy_module] if lazy_module else []
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join([*base_parts, node.module] if node.module else base_parts)
            else:
                base = node.module or ""
            targets = [base]
            # `from pkg import sub` imports the submodule `pkg.sub` when one exists.
            targets += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
        for target in targets:
            for name in _with_parents(target):
                if name in known and name != module:
                    found.add(name)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_nodes(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """The import statements that run when a module with this body is imported: at module
    level and inside the blocks there (if/try/with/for, class bodies), not in function
    bodies nor under `if TYPE_CHECKING:`."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _import_time_nodes(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                for item in getattr(node, field, None) or []:
                    inner = item.body if isinstance(item, ast.ExceptHandler) else [item]
                    yield from _import_time_nodes(inner)


def import_time_imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """Like `imports_of`, but only the imports that run when `module` is imported: the
    ones inside functions (lazy), under `if TYPE_CHECKING:` and lazy route handlers are
    left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    body = ast.Module(body=list(_import_time_nodes(tree.body)), type_ignores=[])
    return _resolve(module, path, ast.walk(body), known, lazy_handlers=False)


def import_time_closure(root: str, root_dir: Path) -> set[str]:
    """Every project module importing `root` imports (module-level imports, transitively)."""
    files = module_files(root_dir)
    known = set(files)
    seen = {root}
    queue = deque([root])
    while queue:
        current = queue.popleft()
        for nxt in import_time_imports_of(current, files[current], known):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def forbidden_chains(
    roots: Iterable[str], root_dir: Path, forbidden: Iterable[str]
) -> list[list[str]]:
    """Breadth-first over the import graph; one shortest chain per forbidden module reached."""
    files = module_files(root_dir)
    known = set(files)
    banned = tuple(forbidden)

    def is_banned(name: str) -> bool:
        return any(name == b or name.startswith(b + ".") for b in banned)

    chains: list[list[str]] = []
    for root in roots:
        assert root in files, f"hot-path module {root} does not exist under {root_dir}"
        parent: dict[str, str | None] = {root: None}
        queue = deque([root])
        while queue:
            current = queue.popleft()
            if is_banned(current):
                chain = [current]
                step = parent[current]
                while step is not None:
                    chain.append(step)
                    step = parent[step]
                chains.append(chain[::-1])
                continue  # report the first way in; don't walk the banned module's imports
            for nxt in sorted(imports_of(current, files[current], known)):
                if nxt not in parent:
                    parent[nxt] = current
                    queue.append(nxt)
    return chains


def cycles(root_dir: Path) -> list[list[str]]:
    """The import circles among the modules under `root_dir`, each as its sorted modules
    (strongly connected components of more than one module; Tarjan's algorithm, iterative).
    Every edge of `imports_of` counts: a function-level import, one under `if TYPE_CHECKING:`
    and a lazy route handler are ways a circle hides, not ways out of one. A module's edge
    to its own parent package is left out (importing `a.b` runs `a/__init__` first; that is
    Python's order, not a circle)."""
    files = module_files(root_dir)
    known = set(files)
    graph = {
        module: sorted(t for t in imports_of(module, path, known) if not module.startswith(t + "."))
        for module, path in files.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)
