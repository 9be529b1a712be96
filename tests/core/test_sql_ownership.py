"""Each store owns every statement on its tables (issue 23): SQL naming a table appears only in
the module(s) that own it, and never in `src/worker/`.

The scan reads every string literal of `src/` (f-strings with their holes blanked; docstrings
skipped) that holds an SQL verb, and collects the tables it names after FROM / JOIN / INTO /
UPDATE / TABLE / EXISTS. A statement that joins two owners' tables has to live with one of them
(D1 runs one statement atomically; splitting it would add a round trip and a race); each such
crossing is declared in `CROSSINGS` with its reason, and a declaration nobody uses any more fails
too, so the list cannot rot.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.import_graph import module_files

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

SEMANTIC = "agent_memory.tiers.semantic"
DO_STORAGE = "agent_runtime_do.storage"

# table -> the module (or package: a prefix ending in a module path) that owns it.
OWNERS: dict[str, str] = {
    # D1: episodic tier
    "memory_episodes": "agent_memory.tiers.episodic",
    "agent_runs": "agent_memory.tiers.episodic",
    "memory_tenant_stats": "agent_memory.tiers.episodic",
    # D1: semantic tier (one package: facts, keyword index, links, provenance, reconcile state)
    "semantic_facts": SEMANTIC,
    "fact_provenance": SEMANTIC,
    "memory_links": SEMANTIC,
    "semantic_terms": SEMANTIC,
    "semantic_term_stats": SEMANTIC,
    "semantic_index_stats": SEMANTIC,
    "keyword_tenants": SEMANTIC,
    # written by the keyword index's triggers, read through the `semantic_terms` view
    "keyword_postings": SEMANTIC,
    "keyword_lengths": SEMANTIC,
    "reconcile_state": SEMANTIC,
    "facts_kept_apart": SEMANTIC,
    # D1: working tier's namespace reads, procedural packs
    "namespace_reads": "agent_memory.tiers.working",
    "workflow_packs": "agent_memory.tiers.episodic",
    # D1: governance
    "memory_events": "agent_memory.governance.writes",
    "erasure_marks": "agent_memory.governance.writes",
    "subject_data_keys": "agent_memory.governance.personal_data",
    # D1: lifecycle
    "lifecycle_archives": "agent_memory.lifecycle.prune",
    "lifecycle_prune_progress": "agent_memory.lifecycle.prune",
    "lifecycle_prunes": "agent_memory.lifecycle.prune",
    "cold_items": "agent_memory.lifecycle.prune",
    "tenant_lifecycle": "agent_memory.lifecycle.retention",
    "agent_instances": "agent_memory.lifecycle.retention",
    # D1: who may act on a tenant
    "operator_grants": "authorization.operator_grants",
    "oauth_clients": "authorization.oauth_store",
    "oauth_codes": "authorization.oauth_store",
    "oauth_consents": "authorization.oauth_store",
    "oauth_grants": "authorization.oauth_store",
    "oauth_access_tokens": "authorization.oauth_store",
    "oauth_refresh_tokens": "authorization.oauth_store",
    # Durable Object SQLite: the AgentRuntime object's storage
    "turn_state": DO_STORAGE,
    "run_log": DO_STORAGE,
    "run_workflows": DO_STORAGE,
    "pending_writes": DO_STORAGE,
    "failed_writes": DO_STORAGE,
    "instance_lifecycle": DO_STORAGE,
    "procedural_workflows": "agent_memory.tiers.episodic",
    # D1: the tenant directory (primary database) and the fences (every database)
    "tenant_directory": "agent_memory.directory",
    "tenant_fences": "agent_memory.directory",
    "tenant_moves": "agent_memory.lifecycle.move",
    "tenant_move_tracking": "agent_memory.lifecycle.move",
    "tenant_move_changes": "agent_memory.lifecycle.move",
    # D1 (primary): exports and imports, the change feed (migration 0002)
    "portability_jobs": "agent_memory.lifecycle.portability",
    "feed_endpoints": "agent_memory.governance.feed",
    "feed_deliveries": "agent_memory.governance.feed",
    "feed_erasures": "agent_memory.governance.feed",
}

# (module, table) -> why a statement of `module` names another owner's table.
CROSSINGS: dict[tuple[str, str], str] = {
    ("authorization.oauth_store", "operator_grants"): (
        "an operator grant's revocation ends the OAuth consents no remaining grant covers, in "
        "the same batch (`operators revoke --wrangler` prints it as SQL)"
    ),
    ("agent_memory.ids", "tenant_fences"): (
        "every job's tenant listing leaves out tenants fenced by a move, in the same statement"
    ),
    ("agent_memory.lifecycle.prune", "memory_episodes"): (
        "archiving copies expired episodes into cold_items in one INSERT ... SELECT"
    ),
    ("agent_memory.lifecycle.prune", "agent_runs"): (
        "registers the instances of expiring runs in agent_instances in one INSERT ... SELECT"
    ),
    ("agent_memory.lifecycle.prune", "agent_instances"): (
        "the same INSERT ... SELECT: its target is retention's instance ledger"
    ),
    ("agent_memory.lifecycle.retention", "agent_runs"): (
        "the instance ledger is the union of agent_runs and agent_instances, one SELECT"
    ),
    (f"{SEMANTIC}.memory", "memory_episodes"): (
        "a fact's provenance joins the episodes it came from (one read for the inspector)"
    ),
    (f"{SEMANTIC}.recall", "memory_events"): (
        "the recall counter moves only if the recall's event is not yet written (NOT EXISTS "
        "in the same statement keeps a retried batch from counting twice)"
    ),
    ("agent_memory.directory", "keyword_tenants"): (
        "a move deletes a tenant's derived rows, in the keyword index by the tenant's code"
    ),
    ("agent_memory.governance.writes", "semantic_facts"): (
        "a fact marked event_in_row is its own memory_written event: the event log reads it "
        "as one (migration 0019), in the same page as the event rows"
    ),
    ("agent_memory.governance.writes", "memory_episodes"): (
        "an episode marked event_in_row is its own memory_written event, read as a fact is"
    ),
    ("agent_memory.lifecycle.portability", "semantic_facts"): (
        "an import finds the facts already stored with a record's content (merged, not "
        "written twice), reading every table of the format as a move reads them"
    ),
    (DO_STORAGE, "agent_runs"): (
        "the alarm asks D1 which of its runs landed before deleting their local copies"
    ),
    (DO_STORAGE, "procedural_workflows"): (
        "the object's schema creates the bandit's table in its own SQLite (the statements "
        "on it are the procedural tier's)"
    ),
}

_VERB = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|REPLACE)\b")
_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|EXISTS|ON)\s+([a-z_][a-z0-9_]*)")


@cache
def _literals(source: str) -> tuple[str, ...]:
    """Every string literal of `source` that is not a docstring; an f-string with its holes
    as `{}`. Cached by the text: four tests scan all of src/, each parsed it again."""
    return tuple(_each_literal(ast.parse(source)))


def _each_literal(tree: ast.Module) -> Iterator[str]:
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    inside_fstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside_fstrings.update(id(v) for v in node.values)
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and id(node) not in inside_fstrings
        ):
            yield node.value


def tables_named(source: str) -> set[str]:
    """The known tables that SQL in `source`'s string literals names."""
    named: set[str] = set()
    for text in _literals(source):
        if _VERB.search(text):
            named.update(t for t in _TABLE.findall(text) if t in OWNERS)
    return named


def owns(module: str, table: str) -> bool:
    owner = OWNERS[table]
    return module == owner or module.startswith(owner + ".")


def violations(module: str, source: str) -> set[tuple[str, str]]:
    """(module, table) pairs where `module` names a table it neither owns nor declares."""
    return {
        (module, table)
        for table in tables_named(source)
        if not owns(module, table) and (module, table) not in CROSSINGS
    }


@cache
def _sources() -> tuple[tuple[str, str], ...]:
    return tuple((module, path.read_text()) for module, path in sorted(module_files(SRC).items()))


def _modules() -> Iterator[tuple[str, str]]:
    yield from _sources()


def test_every_statement_lives_with_the_owner_of_its_tables() -> None:
    found = set().union(*(violations(module, source) for module, source in _modules()))
    assert not found, f"SQL outside its owning store (move it, or declare it in CROSSINGS): {found}"


def test_no_sql_at_the_edge() -> None:
    at_edge = {
        module: tables_named(source)
        for module, source in _modules()
        if module.startswith("worker.") and tables_named(source)
    }
    assert not at_edge


def test_every_declared_crossing_is_still_used() -> None:
    named = {(module, t) for module, source in _modules() for t in tables_named(source)}
    assert set(CROSSINGS) <= named, set(CROSSINGS) - named


def test_every_table_has_an_owner() -> None:
    created: set[str] = set()
    create = re.compile(r"CREATE (?:TABLE|VIEW) (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)")
    for sql in (ROOT / "migrations").glob("*.sql"):
        created.update(create.findall(sql.read_text()))
    for _module, source in _modules():
        for text in _literals(source):
            created.update(create.findall(text))
    assert created == set(OWNERS), (created - set(OWNERS), set(OWNERS) - created)


def test_a_planted_statement_outside_its_owner_is_reported() -> None:
    planted = 'ROWS = "SELECT fact_id FROM semantic_facts WHERE tenant_id = ?"\n'
    assert violations("worker.memory_routes", planted) == {
        ("worker.memory_routes", "semantic_facts")
    }
    in_fstring = 'def q(m):\n    return f"DELETE FROM memory_events WHERE id IN ({m})"\n'
    assert violations("agent_memory.tiers.episodic", in_fstring) == {
        ("agent_memory.tiers.episodic", "memory_events")
    }
    # Prose that happens to say a table's name is not a statement.
    assert violations("worker.app", 'HELP = "facts live in semantic_facts"\n') == set()
