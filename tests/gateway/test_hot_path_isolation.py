"""DESIGN invariant 1: the hot-path modules import nothing that reaches D1, Durable Objects,
Vectorize or R2 — checked over the import graph of src/, not by review.

The walk parses every module under src/ with `ast` and follows `import x.y` and
`from x import y` (absolute and relative, at any depth in the file, including imports
under `if TYPE_CHECKING:` and inside functions, so a lazy import cannot hide a path).
Importing `a.b.c` runs `a/__init__` and `a/b/__init__` too, so parents are edges as well.
Third-party and stdlib modules are leaves: they cannot import our D1 code.
"""

from __future__ import annotations

from pathlib import Path

from tests.import_graph import forbidden_chains, imports_of, module_files

SRC = Path(__file__).resolve().parents[2] / "src"

HOT_PATH_MODULES = (
    "gateway.tool_proxy",
    "gateway.mcp",
    "gateway.credentials",
    "gateway.tool_config",
    "gateway.json_schema",
    "gateway.outbound",
)

FORBIDDEN = (
    "bindings.ports.d1",
    "bindings.ports.do_sql",
    "bindings.ports.sql",
    "bindings.ports.durable_objects",
    "bindings.ports.vectorize",
    "bindings.ports.r2",
    "bindings.ports.object_storage",
    "bindings.ports.object_store",
    "bindings.environment",
    "bindings.cloudflare.d1",
    "bindings.cloudflare.do_sql",
    "bindings.cloudflare.vectorize",
    "bindings.cloudflare.durable_objects",
    "bindings.cloudflare.r2",
    "agent_runtime_do",
    "agent_memory",
)


def test_hot_path_reaches_no_d1_durable_object_vectorize_or_r2_module() -> None:
    chains = forbidden_chains(HOT_PATH_MODULES, SRC, FORBIDDEN)
    assert not chains, "hot path imports forbidden modules:\n" + "\n".join(
        " -> ".join(chain) for chain in chains
    )


def test_the_walk_actually_covers_the_hot_path() -> None:
    # Guards against a vacuous pass: the walk must see the modules we know are imported.
    files = module_files(SRC)
    reached = set(imports_of("gateway.tool_proxy", files["gateway.tool_proxy"], set(files)))
    assert {"gateway.credentials", "gateway.tool_config", "bindings.ports.kv"} <= reached


def test_checker_catches_a_planted_transitive_violation(tmp_path: Path) -> None:
    (tmp_path / "gateway").mkdir()
    (tmp_path / "gateway" / "__init__.py").write_text("")
    (tmp_path / "gateway" / "tool_proxy.py").write_text("from . import helpers\n")
    (tmp_path / "gateway" / "helpers.py").write_text(
        "def lazy():\n    from bindings.environment import Bindings\n    return Bindings\n"
    )
    (tmp_path / "bindings").mkdir()
    (tmp_path / "bindings" / "__init__.py").write_text("")
    (tmp_path / "bindings" / "environment.py").write_text("import bindings.ports.d1\n")
    (tmp_path / "bindings" / "ports").mkdir()
    (tmp_path / "bindings" / "ports" / "__init__.py").write_text("")
    (tmp_path / "bindings" / "ports" / "d1.py").write_text("")

    chains = forbidden_chains(["gateway.tool_proxy"], tmp_path, FORBIDDEN)
    assert chains == [["gateway.tool_proxy", "gateway.helpers", "bindings.environment"]]


def test_checker_catches_a_package_import_and_a_type_checking_import(tmp_path: Path) -> None:
    (tmp_path / "gateway").mkdir()
    (tmp_path / "gateway" / "__init__.py").write_text("")
    (tmp_path / "gateway" / "mcp.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import agent_memory.semantic\n"
    )
    (tmp_path / "agent_memory").mkdir()
    (tmp_path / "agent_memory" / "__init__.py").write_text("")
    (tmp_path / "agent_memory" / "semantic.py").write_text("")

    chains = forbidden_chains(["gateway.mcp"], tmp_path, FORBIDDEN)
    # Importing a submodule runs the package's __init__ too: both are reported.
    assert sorted(chains) == [
        ["gateway.mcp", "agent_memory"],
        ["gateway.mcp", "agent_memory.semantic"],
    ]


def test_the_route_adapter_is_outside_the_hot_path_and_does_reach_bindings() -> None:
    # gateway.routes adapts Bindings; it must not be imported by any hot-path module.
    files = module_files(SRC)
    for module in HOT_PATH_MODULES:
        assert "gateway.routes" not in imports_of(module, files[module], set(files))
    assert forbidden_chains(["gateway.routes"], SRC, FORBIDDEN)


def test_checker_sees_a_lazy_route_handler_named_by_string(tmp_path: Path) -> None:
    # `LazyHandler("module:attribute")` imports on first use: an edge the walk must follow.
    (tmp_path / "gateway").mkdir()
    (tmp_path / "gateway" / "__init__.py").write_text("")
    (tmp_path / "gateway" / "mcp.py").write_text(
        "from worker.routing import LazyHandler\n"
        "HANDLER = LazyHandler('agent_memory.semantic:recall')\n"
    )
    (tmp_path / "agent_memory").mkdir()
    (tmp_path / "agent_memory" / "__init__.py").write_text("")
    (tmp_path / "agent_memory" / "semantic.py").write_text("")

    chains = forbidden_chains(["gateway.mcp"], tmp_path, FORBIDDEN)
    assert sorted(chains) == [
        ["gateway.mcp", "agent_memory"],
        ["gateway.mcp", "agent_memory.semantic"],
    ]
