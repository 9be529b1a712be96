"""The layout is enforced, not described: layers point down, rooms keep their private modules
private.

* Top-level packages under `src/` form layers (`LAYERS`): a module may import its own
  package or a package of a lower layer, never a peer or anything above.
* Inside the memory core the rooms form layers too (`CORE_ROOMS`, see
  `agent_memory/__init__.py`).
* A module whose name starts with `_` is private to the package that holds it: only modules
  inside that package may import it.
* No import circles anywhere in `src/`, counting function-level imports, imports under
  `if TYPE_CHECKING:` and lazy route handlers (`tests.import_graph.cycles`): a module that
  needs a name of one that needs it means one of them holds what belongs lower down.
Size is a prompt to look, not a rule to split by: `benchmarks/request_paths.py` lists the
modules over 400 lines for a reviewer, and a cohesive module may be as large as its concern.
Each rule is also run on a planted violation, so a rule that cannot fail would show.
"""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import cycles, imports_of, module_files

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

# Bottom to top. Peers in one layer may not import each other.
LAYERS: dict[str, int] = {
    "http_messages": 0,
    "bindings": 0,
    "agent_memory": 1,
    "authorization": 1,
    "agent_runtime_do": 2,
    "gateway": 2,
    "worker": 3,
}
CORE_ROOMS: dict[str, int] = {
    "ids": 0,
    "cursors": 0,
    "placement": 0,
    "directory": 0,
    "namespace": 1,
    "retrieval": 1,
    "governance": 2,
    "tiers": 3,
    "lifecycle": 4,
    "hot_warm_cold": 5,
    "memory": 6,
    "agent": 7,
}


def _edges(root: Path) -> list[tuple[str, str]]:
    files = module_files(root)
    known = set(files)
    return [
        (module, target)
        for module, path in sorted(files.items())
        for target in sorted(imports_of(module, path, known))
    ]


def layer_violations(root: Path, layers: dict[str, int]) -> list[str]:
    """Imports from a module's top-level package to a peer or higher package."""
    found = []
    for module, target in _edges(root):
        source, dest = module.split(".")[0], target.split(".")[0]
        if source == dest or source not in layers or dest not in layers:
            continue
        if layers[dest] >= layers[source]:
            found.append(f"{module} -> {target}")
    return found


def room_violations(root: Path, core: str, rooms: dict[str, int]) -> list[str]:
    """Imports inside `core` from one room to a peer or higher room."""
    found = []
    for module, target in _edges(root):
        if not (module.startswith(core + ".") and target.startswith(core + ".")):
            continue
        source, dest = module.split(".")[1], target.split(".")[1]
        if source == dest:
            continue
        if source not in rooms or dest not in rooms:
            found.append(f"{module} -> {target} (a room not in the layout)")
        elif rooms[dest] >= rooms[source]:
            found.append(f"{module} -> {target}")
    return found


def private_violations(root: Path) -> list[str]:
    """Imports of a `_module` from outside the package that holds it."""
    found = []
    for module, target in _edges(root):
        package, _, name = target.rpartition(".")
        private = name.startswith("_") and not name.startswith("__")
        if private and not module.startswith(package + "."):
            found.append(f"{module} -> {target}")
    return found


def test_packages_import_only_downward() -> None:
    assert layer_violations(SRC, LAYERS) == []


def test_every_shipped_package_and_module_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert packages | modules == set(LAYERS)


def test_core_rooms_import_only_downward() -> None:
    assert room_violations(SRC, "agent_memory", CORE_ROOMS) == []


def test_every_core_module_lives_in_a_known_room() -> None:
    rooms = {p.stem for p in (SRC / "agent_memory").iterdir() if p.name != "__init__.py"}
    assert {r for r in rooms if r != "__pycache__"} == set(CORE_ROOMS)


def test_no_module_imports_another_packages_private_module() -> None:
    assert private_violations(SRC) == []


def test_no_import_circles() -> None:
    assert cycles(SRC) == []


def test_local_runtime_and_tests_respect_private_modules_too() -> None:
    files = {
        f"{top}.{name}": path
        for top in ("local_runtime", "tests")
        for name, path in module_files(ROOT / top).items()
    }
    shipped = set(module_files(SRC))
    found = []
    for module, path in sorted(files.items()):
        for target in imports_of(module, path, shipped):
            package, _, name = target.rpartition(".")
            if name.startswith("_") and not name.startswith("__"):
                found.append(f"{module} -> {target} ({package} is not theirs)")
    assert found == []


# --------------------------------------------------------------------- the rules can fail


def _write(root: Path, module: str, text: str) -> None:
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.parents:
        if parent == root:
            break
        init = parent / "__init__.py"
        if not init.exists():
            init.write_text("")
    path.write_text(text)


def test_an_upward_import_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "agent_memory.tiers.working", "from worker.app import handle\n")
    _write(tmp_path, "worker.app", "def handle(): ...\n")
    assert layer_violations(tmp_path, LAYERS) == [
        "agent_memory.tiers.working -> worker",
        "agent_memory.tiers.working -> worker.app",
    ]


def test_a_peer_import_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "gateway.mcp", "import agent_runtime_do.core\n")
    _write(tmp_path, "agent_runtime_do.core", "")
    assert layer_violations(tmp_path, LAYERS) == [
        "gateway.mcp -> agent_runtime_do",
        "gateway.mcp -> agent_runtime_do.core",
    ]


def test_a_room_reaching_up_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "agent_memory.tiers.semantic.memory",
        "def f():\n    import agent_memory.lifecycle.erase\n",
    )
    _write(tmp_path, "agent_memory.lifecycle.erase", "")
    assert room_violations(tmp_path, "agent_memory", CORE_ROOMS) == [
        "agent_memory.tiers.semantic.memory -> agent_memory.lifecycle",
        "agent_memory.tiers.semantic.memory -> agent_memory.lifecycle.erase",
    ]


def test_reaching_into_a_private_module_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "agent_memory.tiers.semantic._writes", "")
    _write(tmp_path, "agent_memory.tiers.semantic.memory", "from . import _writes\n")
    _write(
        tmp_path,
        "agent_memory.lifecycle.reconciler",
        "from agent_memory.tiers.semantic._writes import X\n",
    )
    assert private_violations(tmp_path) == [
        "agent_memory.lifecycle.reconciler -> agent_memory.tiers.semantic._writes"
    ]


def test_a_lazy_route_handler_pointing_up_is_reported(tmp_path: Path) -> None:
    # A handler named by string imports its module on first use: still an import edge.
    _write(tmp_path, "gateway.routes", "HANDLER = lazy('worker.memory_routes:read_memory')\n")
    _write(tmp_path, "worker.memory_routes", "async def read_memory(): ...\n")
    assert layer_violations(tmp_path, LAYERS) == [
        "gateway.routes -> worker",
        "gateway.routes -> worker.memory_routes",
    ]


def test_an_import_circle_is_reported_however_it_hides(tmp_path: Path) -> None:
    # A circle closed by a function-level import, one by a `TYPE_CHECKING` import and one
    # by a lazy route handler; a module importing its own parent package is no circle.
    _write(tmp_path, "worker.app", "ROUTE = lazy('worker.memory_routes:read_memory')\n")
    _write(tmp_path, "worker.memory_routes", "from worker.app import ROUTE\n")
    _write(tmp_path, "agent_runtime_do.core", "from agent_runtime_do import storage\n")
    _write(
        tmp_path,
        "agent_runtime_do.storage",
        "if TYPE_CHECKING:\n    from agent_runtime_do.core import Core\n",
    )
    _write(tmp_path, "gateway.mcp", "def f():\n    import gateway.routes\n")
    _write(tmp_path, "gateway.routes", "import gateway.mcp\n")
    _write(tmp_path, "bindings.ports.kv", "import bindings.ports\n")
    assert cycles(tmp_path) == [
        ["agent_runtime_do.core", "agent_runtime_do.storage"],
        ["gateway.mcp", "gateway.routes"],
        ["worker.app", "worker.memory_routes"],
    ]
