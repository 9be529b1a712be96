"""Subject erase in D1 (`RowEraser`): find the rows that are traces of a subject, then delete
them, with the links and provenance that point at them, and the memory events about them.

Every statement is `tenant_id = ?` first with at most `IDS_PER_STATEMENT` ids (D1 binds
≤ 100 parameters), batched 50 statements at a time. Events are paged by id, and those that
only list an erased fact among their results are scrubbed rather than deleted. Deleting
what is already gone deletes nothing, so a re-run finishes an interrupted erase.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent_memory.governance.personal_data import destroy_statement
from agent_memory.lifecycle._erase_rules import EraseReport, Found, SubjectMatcher
from agent_memory.statements import chunks
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.sql import SqlValue

EVENTS_PAGE = 500


class RowEraser:
    """Finds and deletes one tenant's D1 rows that are traces of a subject."""

    def __init__(self, tenant_id: str, db: D1Database) -> None:
        self.tenant_id = tenant_id
        self._db = db

    async def find(self, subject: str) -> Found:
        """The episodes, facts (with the history they superseded) and runs that are traces."""
        found = Found()
        episodes = await (
            self._db.prepare(
                "SELECT episode_id, run_id, content_hash FROM memory_episodes WHERE tenant_id = ? "
                "AND (subject = ? OR instr(content, ?) > 0 OR instr(data, ?) > 0)"
            )
            .bind(self.tenant_id, subject, subject, subject)
            .all()
        )
        for row in episodes.results:
            found.episodes.add(str(row["episode_id"]))
            found.runs.add(str(row["run_id"]))
            found.hashes.add(str(row["content_hash"]))
        facts = await (
            self._db.prepare(
                "SELECT fact_id, content_hash FROM semantic_facts WHERE tenant_id = ? "
                "AND (subject = ? OR object = ? OR instr(content, ?) > 0 "
                "OR instr(metadata, ?) > 0 OR (key_entity <> '' AND key_entity = lower(?)))"
            )
            # The derived key (migration 0005) is lower-cased: a free-text fact stored under
            # the catch-all subject is still about the entity its text names.
            .bind(self.tenant_id, subject, subject, subject, subject, subject)
            .all()
        )
        for row in facts.results:
            found.facts.add(str(row["fact_id"]))
            found.hashes.add(str(row["content_hash"]))
        # Facts superseded by an erased fact (duplicates merged into it, earlier values it
        # replaced) are its history: they go too, transitively.
        frontier = sorted(found.facts)
        while frontier:
            newer: list[str] = []
            for chunk in chunks(frontier):
                marks = ", ".join("?" for _ in chunk)
                result = await (
                    self._db.prepare(
                        "SELECT fact_id, content_hash FROM semantic_facts WHERE tenant_id = ? "
                        f"AND superseded_by IN ({marks})"
                    )
                    .bind(self.tenant_id, *chunk)
                    .all()
                )
                for row in result.results:
                    fact_id = str(row["fact_id"])
                    if fact_id not in found.facts:
                        found.facts.add(fact_id)
                        found.hashes.add(str(row["content_hash"]))
                        newer.append(fact_id)
            frontier = newer
        runs = await (
            self._db.prepare(
                "SELECT run_id FROM agent_runs WHERE tenant_id = ? AND (instr(input, ?) > 0 "
                "OR instr(COALESCE(output, ''), ?) > 0 OR instr(COALESCE(error, ''), ?) > 0)"
            )
            .bind(self.tenant_id, subject, subject, subject)
            .all()
        )
        found.runs.update(str(row["run_id"]) for row in runs.results)
        return found

    async def _run_deletes(
        self, sql: str, ids: Sequence[str], extra: Sequence[SqlValue] = ()
    ) -> int:
        """`sql` with `{marks}` for a chunk of ids; returns the rows it deleted."""
        total = 0
        statements: list[D1Statement] = []
        for chunk in chunks(list(ids)):
            marks = ", ".join("?" for _ in chunk)
            statements.append(
                self._db.prepare(sql.format(marks=marks)).bind(self.tenant_id, *extra, *chunk)
            )
        for start in range(0, len(statements), 50):
            results = await self._db.batch(statements[start : start + 50])
            total += sum(r.meta.changes for r in results)
        return total

    async def _count_then_delete(self, table: str, column: str, ids: Sequence[str]) -> int:
        # `meta.changes` may include trigger writes (the episode counter): count first.
        total = 0
        for chunk in chunks(list(ids)):
            marks = ", ".join("?" for _ in chunk)
            value = await (
                self._db.prepare(
                    f"SELECT COUNT(*) AS n FROM {table} "
                    f"WHERE tenant_id = ? AND {column} IN ({marks})"
                )
                .bind(self.tenant_id, *chunk)
                .first_value("n")
            )
            total += int(value or 0)
        await self._run_deletes(
            f"DELETE FROM {table} WHERE tenant_id = ? AND {column} IN ({{marks}})", ids
        )
        return total

    async def delete(self, found: Found, matcher: SubjectMatcher, report: EraseReport) -> None:
        """Delete what `find` found: links and provenance, events, then the rows; the
        counts go into `report`."""
        # Crypto-shredding first: from here on, whatever is left of the subject's sealed
        # personal fields (here, in archives, in backups) has no key.
        destroyed = await destroy_statement(self._db, self.tenant_id, matcher.subject).run()
        report.data_keys = destroyed.meta.changes
        facts = sorted(found.facts)
        episodes = sorted(found.episodes)
        runs = sorted(found.runs)
        sources = sorted(found.facts | found.episodes | found.runs)
        report.links = await self._run_deletes(
            "DELETE FROM memory_links WHERE tenant_id = ? AND from_fact_id IN ({marks})", facts
        ) + await self._run_deletes(
            "DELETE FROM memory_links WHERE tenant_id = ? AND to_fact_id IN ({marks})", facts
        )
        report.provenance = await self._run_deletes(
            "DELETE FROM fact_provenance WHERE tenant_id = ? AND fact_id IN ({marks})", facts
        ) + await self._run_deletes(
            "DELETE FROM fact_provenance WHERE tenant_id = ? AND source_id IN ({marks})", sources
        )
        report.events = await self._erase_events(matcher, report)
        report.facts = await self._count_then_delete("semantic_facts", "fact_id", facts)
        report.episodes = await self._count_then_delete("memory_episodes", "episode_id", episodes)
        report.runs = await self._count_then_delete("agent_runs", "run_id", runs)
        report.keyword_index_optimized = await self._optimize_keyword_index()

    async def _optimize_keyword_index(self) -> bool:
        """The keyword index is the tenant's postings (`semantic_terms`, migration 0009),
        ordinary rows the delete trigger removes with each fact, so no index segment outlives
        them (the FTS5 `optimize` this replaced). The trigger only decrements a term's
        document count (`semantic_term_stats.df`): a term no remaining fact has would keep
        its text, so those rows go here. Always run, so a re-run finishes an interrupted
        erase. True when the tenant has no postings of a fact that is gone."""
        await (
            self._db.prepare("DELETE FROM semantic_term_stats WHERE tenant_id = ? AND df <= 0")
            .bind(self.tenant_id)
            .run()
        )
        orphans = (
            await self._db.prepare(
                "SELECT COUNT(*) AS n FROM semantic_terms t WHERE t.tenant_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM semantic_facts f WHERE f.tenant_id = t.tenant_id "
                "AND f.fts_rowid = t.fts_rowid)"
            )
            .bind(self.tenant_id)
            .first_value("n")
        )
        return int(orphans or 0) == 0

    async def _erase_events(self, matcher: SubjectMatcher, report: EraseReport) -> int:
        """Page through the tenant's events (by id): delete the ones that are traces, scrub
        erased fact ids out of the others' results."""
        doomed: list[str] = []
        scrubs: list[D1Statement] = []
        after = ""
        while True:
            result = await (
                self._db.prepare(
                    "SELECT event_id, run_id, content_hash, payload FROM memory_events "
                    "WHERE tenant_id = ? AND event_id > ? ORDER BY event_id LIMIT ?"
                )
                .bind(self.tenant_id, after, EVENTS_PAGE)
                .all()
            )
            rows = result.results
            for row in rows:
                if matcher.event(row):
                    doomed.append(str(row["event_id"]))
                    continue
                payload = matcher.scrubbed(row)
                if payload is not None:
                    scrubs.append(
                        self._db.prepare(
                            "UPDATE memory_events SET payload = ? "
                            "WHERE tenant_id = ? AND event_id = ?"
                        ).bind(
                            json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
                            self.tenant_id,
                            str(row["event_id"]),
                        )
                    )
            if len(rows) < EVENTS_PAGE:
                break
            after = str(rows[-1]["event_id"])
        for start in range(0, len(scrubs), 50):
            await self._db.batch(scrubs[start : start + 50])
        report.events_scrubbed = len(scrubs)
        if not doomed:
            return 0
        return await self._run_deletes(
            "DELETE FROM memory_events WHERE tenant_id = ? AND event_id IN ({marks})", doomed
        )
