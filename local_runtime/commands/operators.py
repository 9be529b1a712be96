"""`operators grant|revoke`: which Access identities may operate which tenants.

    agent-memory operators grant PRINCIPAL (--tenant T ... | --platform-admin)
        [--kind email|common_name|group] [--state .state]
    agent-memory operators revoke PRINCIPAL (--tenant T ... | --platform-admin) [--kind ...]

PRINCIPAL is an email (users), an Access service token's common name, or an Access group
(`--kind group`, matched against the token's `groups` claim). Grants are rows in the state
folder's D1 (`operator_grants`), read by every Access-gated route (`worker.operators`).
Prints the result as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from local_runtime.commands.common import add_state_option


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from agent_memory.scope import is_tenant
    from local_runtime.runtime import LocalRuntime
    from worker.operators import PLATFORM, grant, revoke_grant

    tenants = [PLATFORM] if args.platform_admin else list(args.tenant or [])
    bad = [t for t in tenants if t != PLATFORM and not is_tenant(t)]
    if not tenants or bad:
        raise SystemExit("error: give --tenant T (well-formed) or --platform-admin")
    runtime = LocalRuntime.open(args.state)
    try:
        await runtime.migrate()
        bindings = runtime.bindings()
        done: list[Any] = []
        for tenant in tenants:
            if args.operators_command == "grant":
                made = await grant(bindings, tenant, args.kind, args.principal, "cli")
                done.append(made.model_dump())
            else:
                removed = await revoke_grant(bindings, tenant, args.kind, args.principal)
                done.append({"tenant": tenant, "revoked": removed})
        return {"principal": args.principal, "kind": args.kind, args.operators_command: done}
    finally:
        await runtime.close()


def cmd_operators(args: argparse.Namespace) -> int:
    print(json.dumps(asyncio.run(_run(args)), indent=2))
    return 0


def register(sub: Any) -> None:
    operators = sub.add_parser("operators", help="tenant grants of Access identities")
    actions = operators.add_subparsers(dest="operators_command", required=True, metavar="ACTION")
    for name, text in (("grant", "let an identity operate tenants"), ("revoke", "take it back")):
        action = actions.add_parser(name, help=text)
        action.add_argument("principal", help="email, service-token common name or group")
        action.add_argument("--kind", choices=("email", "common_name", "group"), default="email")
        action.add_argument("--tenant", action="append", help="a tenant (repeatable)")
        action.add_argument(
            "--platform-admin", action="store_true", help="every tenant and cross-tenant routes"
        )
        add_state_option(action)
        action.set_defaults(func=cmd_operators)
