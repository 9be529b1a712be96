"""The memory lifecycle on the local runtime's state folder (docs/lifecycle.md, "CLI"): the
Worker's cron and admin code run against `--state`, progress on stderr, the result as JSON on
stdout. Locally a prune's budget is unlimited unless `--max-operations` / `--max-seconds` say
otherwise; one stopped by its budget is finished by running the same `--job` again.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from local_runtime.commands.common import command, open_runtime, run_with

UNLIMITED_OPERATIONS = 10**12
UNLIMITED_SECONDS = 10.0**9
_open = open_runtime  # tests replace it to pick an embedder


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _emit(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def _now_ms(args: argparse.Namespace, runtime: Any) -> int:
    at = getattr(args, "at", None)
    return int(at) if at is not None else int(runtime.clock.now() * 1000)


def cmd_prune(args: argparse.Namespace) -> int:
    from agent_memory.ids import new_ulid
    from agent_memory.lifecycle.prune import PruneBudget, Pruner, TenantPruneCounts
    from agent_memory.placement import parse_placement

    runtime = _open(args)
    budget = PruneBudget(
        max_operations=args.max_operations or UNLIMITED_OPERATIONS,
        max_seconds=args.max_seconds or UNLIMITED_SECONDS,
        batch_rows=args.batch_rows,
    )
    pruners = [
        Pruner(
            runtime.shard_db(shard.name),
            runtime.cold,
            runtime.clock,
            default_retention_days=runtime.settings.episode_retention_days,
            budget=budget,
            placement=parse_placement(runtime.settings.memory_placement),
        )
        for shard in runtime.shards  # every shard's database holds its own tenants
    ]
    at = _now_ms(args, runtime)
    tenants = args.tenant or None
    started = time.perf_counter()
    done = {"tenants": 0, "rows": 0}

    def progress(counts: TenantPruneCounts) -> None:
        done["tenants"] += 1
        if args.dry_run:
            _say(
                f"  {counts.tenant_id}: {counts.episodes_due} episode(s), {counts.runs_due} "
                f"run(s), {counts.events_due} event(s) past {counts.retention_days} days"
            )
            return
        rows = counts.episodes_now + counts.runs_now + counts.events_now
        done["rows"] += rows
        elapsed = time.perf_counter() - started
        _say(
            f"  [{done['tenants']}] {counts.tenant_id}: archived+deleted {counts.episodes_now} "
            f"episode(s), {counts.runs_now} run(s), {counts.events_now} event(s) in "
            f"{counts.batches_now} batch(es){' (done)' if counts.done else ''}"
            f"{' ERROR ' + counts.error if counts.error else ''} — {done['rows']} rows, "
            f"{elapsed:.1f}s"
        )

    async def go(runtime: Any) -> list[Any]:
        reports = []
        job = args.job or f"cli-{new_ulid(at / 1000)}"
        for shard, pruner in zip(runtime.shards, pruners, strict=True):
            if args.dry_run:
                _say(f"prune --dry-run at {at} on shard {shard.name} (nothing is written)")
                reports.append(await pruner.dry_run(at, tenants=tenants, progress=progress))
                continue
            _say(f"prune job {job} on shard {shard.name}: archiving, then deleting")
            reports.append(await pruner.run(job, at, tenants=tenants, progress=progress))
        return reports

    reports = run_with(runtime, go)
    tenants_done = [t for report in reports for t in report.tenants]
    _emit(
        {
            **reports[0].summary(),
            "shards": {s.name: r.summary() for s, r in zip(runtime.shards, reports, strict=True)},
            "wall_seconds": round(time.perf_counter() - started, 3),
            "tenants": [
                t.model_dump(exclude={"archives_now"}, exclude_none=True) for t in tenants_done
            ],
        }
    )
    for report in reports:
        if report.stopped_by is not None:
            _say(
                f"stopped by the {report.stopped_by} budget: run again with --job {report.prune_id}"
            )
    return 0 if all(t.error is None for t in tenants_done) else 1


def cmd_brief(args: argparse.Namespace) -> int:
    from agent_memory.directory import home_of
    from agent_memory.lifecycle.brief import build_brief

    async def go(runtime: Any) -> Any:
        # Every shard's tenants, or the named ones on their own shards.
        named: dict[str, list[str] | None] = {s.name: None for s in runtime.shards}
        if args.tenant:
            named = {}
            for tenant in args.tenant:
                home = await home_of(runtime.bindings(), tenant)
                named[home] = [*(named.get(home) or []), tenant]
        briefs = [
            await build_brief(
                runtime.shard_db(shard),
                now_ms=_now_ms(args, runtime),
                default_retention_days=runtime.settings.episode_retention_days,
                tenants=tenants,
            )
            for shard, tenants in named.items()
        ]
        merged = briefs[0]
        for other in briefs[1:]:
            merged.tenants += other.tenants
            merged.warnings += other.warnings
        return merged

    brief = run_with(_open(args), go)
    for warning in brief.warnings:
        _say(f"WARNING: {warning}")
    if args.json:
        _emit({**brief.summary(), "tenants": [t.model_dump() for t in brief.tenants]})
        return 0
    header = (
        f"{'tenant':<24} {'level':<9} {'episodes':>9} {'limit':>8} {'past ret.':>9} "
        f"{'facts':>7} {'pending':>7} {'archived':>9}"
    )
    print(header)
    for t in brief.tenants:
        print(
            f"{t.tenant_id:<24} {t.level:<9} {t.episodes:>9} {t.episode_limit:>8} "
            f"{t.episodes_past_retention:>9} {t.facts_active:>7} {t.facts_pending_vector:>7} "
            f"{t.archived_rows:>9}"
        )
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from agent_memory.lifecycle.retention import known_tenants
    from agent_memory.memory import Memory

    async def go(runtime: Any) -> list[dict[str, Any]]:
        bindings = runtime.bindings()
        tenants = args.tenant or sorted(
            {
                t
                for shard in runtime.shards
                for t in await known_tenants(
                    runtime.shard_db(shard.name), ("semantic_facts", "memory_episodes")
                )
            }
        )
        out = []
        for index, tenant in enumerate(tenants, 1):
            reconciler = (await Memory.open(bindings, tenant)).reconciler()
            if reconciler is None:
                raise SystemExit("reconcile needs D1, the vector index and an embedder")
            report = await reconciler.run()
            _say(
                f"  [{index}/{len(tenants)}] {tenant}: merged {report.merged_exact}+"
                f"{report.merged_similar}, superseded {report.superseded_conflicts}, "
                f"updates {report.superseded_updates} of {report.update_pairs} pair(s) "
                f"({report.adjudicator}), "
                f"promoted {report.promoted}, summarised {report.summarised}, "
                f"links +{report.links_added}"
            )
            out.append(report.model_dump(exclude={"new_fact_ids"}))
        return out

    _emit(run_with(_open(args), go))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from agent_memory.tiers.semantic.keyword_index import renormalise_all

    renormalised = run_with(_open(args), lambda runtime: renormalise_all(runtime.db, args.tenant))
    _emit({"renormalised": renormalised})
    return 0


def cmd_erase_subject(args: argparse.Namespace) -> int:
    from agent_memory.lifecycle.erase import validate_subject
    from agent_memory.memory import Memory

    try:
        subject = validate_subject(args.subject)
    except ValueError as exc:
        _say(f"error: {exc}")
        return 2

    async def go(runtime: Any) -> Any:
        memory = await Memory.open(runtime.bindings(), args.tenant)
        return await memory.eraser(lambda step, n: _say(f"  {step}: {n}")).erase(subject)

    _say(f"erasing {subject!r} from tenant {args.tenant}")
    report = run_with(_open(args), go)
    _emit(report.model_dump())
    return 0 if report.complete else 1


def cmd_retention(args: argparse.Namespace) -> int:
    from agent_memory.lifecycle.retention import LifecycleUpdate
    from agent_memory.memory import Memory

    fields: dict[str, Any] = {}
    if args.days is not None or args.default_days:
        fields["episode_retention_days"] = None if args.default_days else args.days
    if args.limit is not None or args.default_limit:
        fields["episode_limit"] = None if args.default_limit else args.limit
    update = LifecycleUpdate.model_validate(fields) if fields else None

    async def go(runtime: Any) -> Any:
        memory = await Memory.open(runtime.bindings(), args.tenant)
        return await memory.lifecycle(update, by="cli")

    _emit(run_with(_open(args), go).model_dump())
    return 0


def cmd_shards(args: argparse.Namespace) -> int:
    from agent_memory.directory import homes
    from worker.lifecycle_jobs import database_report

    async def go(runtime: Any) -> Any:
        placed = await homes(runtime.bindings())
        report = await database_report(runtime.bindings())
        for shard in report:
            shard["tenants"] = sorted(t for t, s in placed.items() if s == shard["shard"])
        return report

    _emit(run_with(_open(args), go))
    return 0


def cmd_move(args: argparse.Namespace) -> int:
    """Start (`--to`), cancel (`--cancel`), resume and watch a tenant's move: steps until it
    is done (or cancelled), or until it waits for the grace period (run the command again
    after it), printing each step."""
    from agent_memory.lifecycle.move import (
        FINISHED,
        advance,
        cancel_move,
        move_status,
        recheck_move,
        start_move,
    )
    from http_messages import ApiError

    async def go(runtime: Any) -> Any:
        try:
            bindings = runtime.bindings()
            if args.to:
                await start_move(bindings, args.tenant, args.to)
            if args.cancel:
                await cancel_move(bindings, args.tenant)
            if args.recheck:
                await recheck_move(bindings, args.tenant)
            status = await move_status(bindings, args.tenant)
            if status is None:
                raise SystemExit(f"tenant {args.tenant} has no move; start one with --to")
            while not args.status and status.phase not in FINISHED:
                before = (status.phase, status.progress)
                status = await advance(bindings, args.tenant)
                _say(f"  {status.phase}: {json.dumps(status.progress, default=str)[:160]}")
                if (status.phase, status.progress) == before:
                    if status.error:  # e.g. a check that found rows differing: an operator's
                        _say(f"  stopped: {status.error}")
                    else:
                        _say("  waiting: the source is deleted after the grace period; run again")
                    break
            return status.model_dump()
        except ApiError as refused:  # 409 move_busy / move_in_progress, 422 unknown_shard...
            raise SystemExit(f"{refused.code}: {refused.message}") from None

    _emit(run_with(_open(args), go))
    return 0


def register(sub: Any) -> None:
    help = "archive episodes, runs and events past retention to the cold tier, delete"
    prune = command(sub, "prune", cmd_prune, help)
    prune.add_argument("--dry-run", action="store_true", help="count what would go; write nothing")
    prune.add_argument("--tenant", action="append", help="only this tenant (repeatable)")
    prune.add_argument("--batch-rows", type=int, default=500)
    prune.add_argument("--max-operations", type=int, default=None, help="D1+R2 calls budget")
    prune.add_argument("--max-seconds", type=float, default=None, help="wall-time budget")
    prune.add_argument("--job", help="job id (resume a job stopped by its budget)")
    prune.add_argument("--at", type=int, help="the prune's time, epoch ms (default now)")

    help = "per-tenant episodes, facts, pending vectors, warnings"
    brief = command(sub, "brief", cmd_brief, help)
    brief.add_argument("--tenant", action="append")
    brief.add_argument("--json", action="store_true")
    brief.add_argument("--at", type=int, help="epoch ms (default now)")

    help = "dedup, conflicts, promotion, decay, linking"
    command(sub, "reconcile", cmd_reconcile, help).add_argument("--tenant", action="append")

    help = "map indexed terms through the current spelling/irregular-form list"
    reindex = command(sub, "reindex", cmd_reindex, help)
    reindex.add_argument("--tenant", action="append", help="only this tenant (repeatable)")

    help = "remove every trace of a subject of a tenant"
    command(sub, "erase-subject", cmd_erase_subject, help, "tenant", "subject")

    help = "show or override a tenant's retention/limit"
    retention = command(sub, "retention", cmd_retention, help, "tenant")
    group = retention.add_mutually_exclusive_group()
    group.add_argument("--days", type=int)
    group.add_argument("--default-days", action="store_true")
    limit = retention.add_mutually_exclusive_group()
    limit.add_argument("--limit", type=int)
    limit.add_argument("--default-limit", action="store_true")

    command(sub, "shards", cmd_shards, "each shard's size, vectors and tenants")

    help = "move a tenant to another shard online: start, resume, watch"
    move = command(sub, "move", cmd_move, help, "tenant")
    move.add_argument("--to", help="start moving to this shard (MEMORY_SHARDS name)")
    move.add_argument("--status", action="store_true", help="only show where the move stands")
    move.add_argument(
        "--cancel", action="store_true", help="cancel it before its switch, and undo the copy"
    )
    move.add_argument(
        "--recheck",
        action="store_true",
        help="run again a switched move's check that found rows differing (after repairing them)",
    )
