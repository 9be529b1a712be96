"""The hot/warm/cold ADR on the local runtime's state folder (docs/tiered-memory.md).

`namespace-backfill` copies every legacy working-memory KV key to its canonical item key
(`agent_memory.tiers.working`; never overwrites a canonical key, never deletes one) and
prints the counts as JSON; on Cloudflare the same step is
`POST /admin/tenants/{tenant}/namespace-backfill`. `placement` prints the data-placement
table as configured (`MEMORY_PLACEMENT` applied) and the migration phase of the flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from local_runtime.commands.common import command, open_runtime, run_with


def cmd_backfill(args: argparse.Namespace) -> int:
    from agent_memory.tiers.working import backfill_all

    report = run_with(
        open_runtime(args),
        lambda runtime: backfill_all(
            runtime.kv, runtime.clock, tenant=args.tenant, dry_run=args.dry_run
        ),
    )
    print(
        f"namespace backfill: {report.copied} copied, {report.already_canonical} already "
        f"canonical, {report.expiring} expiring, {report.invalid} invalid",
        file=sys.stderr,
    )
    print(json.dumps(report.model_dump(), indent=2, sort_keys=True))
    return 0


def cmd_placement(args: argparse.Namespace) -> int:
    from agent_memory.placement import PlacementError, parse_placement
    from agent_memory.tiers.working import NamespaceFlags

    runtime = open_runtime(args)
    phase = NamespaceFlags.of(runtime.bindings().settings).phase
    asyncio.run(runtime.close())
    try:
        table = parse_placement(runtime.settings.memory_placement)
    except PlacementError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"placement": table.rows(), "namespace_phase": phase}, indent=2))
        return 0
    print(f"namespace phase: {phase}")
    for row in table.rows():
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


def register(sub: Any) -> None:
    help = "copy legacy working-memory KV keys to canonical item keys"
    backfill = command(sub, "namespace-backfill", cmd_backfill, help)
    backfill.add_argument("--tenant", help="only this tenant")
    backfill.add_argument("--dry-run", action="store_true", help="count; write nothing")

    help = "the data-placement table as configured"
    command(sub, "placement", cmd_placement, help).add_argument("--json", action="store_true")
