"""`operators grant|revoke`: which Access identities may operate which tenants (docs/memory-api.md).

PRINCIPAL is an email, an Access service token's common name (`<client id>.access`) or, with
`--kind group`, an Access group. Grants are rows in the state folder's D1 (`operator_grants`);
revoking also ends the OAuth consents the grant carried (docs/gateway.md "Connected clients").
With `--wrangler` nothing local is touched: it prints the `npx wrangler d1 execute DATABASE
--remote --command "..."` that makes the same change in a deployed Worker's D1.
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from typing import Any, Literal, cast

from local_runtime.commands.common import command, open_runtime, run_with

DEFAULT_DATABASE = "agent-memory"


def _tenants(args: argparse.Namespace) -> list[str]:
    from agent_memory.namespace import is_tenant
    from authorization.operator_grants import PLATFORM

    tenants = [PLATFORM] if args.platform_admin else list(args.tenant or [])
    bad = [t for t in tenants if t != PLATFORM and not is_tenant(t)]
    if not tenants or bad:
        raise SystemExit("error: give --tenant T (well-formed) or --platform-admin")
    return tenants


def shell_word(text: str) -> str:
    """`text` as one shell word: double-quoted when nothing in it is special inside double
    quotes (readable SQL with its single quotes), else `shlex.quote`d."""
    if not any(c in text for c in '"$`\\!'):
        return f'"{text}"'
    return shlex.quote(text)


def cmd_wrangler(args: argparse.Namespace) -> int:
    """Print the `wrangler d1 execute` commands running the SQL that `grant` / `revoke_grant`
    would run, as literal statements."""
    from authorization.operator_grants import PrincipalKind, literal_statements

    principal = args.principal
    if not 1 <= len(principal.strip()) <= 256 or any(ord(c) < 32 for c in principal):
        raise SystemExit("error: PRINCIPAL must be 1-256 printable characters")
    action = cast("Literal['grant', 'revoke']", args.operators_command)
    kind = cast("PrincipalKind", args.kind)
    now_ms = int(time.time() * 1000)
    for statement in literal_statements(action, _tenants(args), kind, principal, "cli", now_ms):
        print(
            f"npx wrangler d1 execute {shlex.quote(args.database)} --remote "
            f"--command {shell_word(statement)}"
        )
    return 0


async def _run(args: argparse.Namespace, tenants: list[str], runtime: Any) -> dict[str, Any]:
    from authorization.operator_grants import grant, revoke_grant

    bindings = runtime.bindings()
    done: list[Any] = []
    for tenant in tenants:
        if args.operators_command == "grant":
            made = await grant(bindings, tenant, args.kind, args.principal, "cli")
            done.append(made.model_dump())
        else:
            removed = await revoke_grant(bindings, tenant, args.kind, args.principal)
            done.append({"tenant": tenant, "revoked": removed})
    if args.operators_command == "revoke":  # the OAuth consents it carried end now
        from worker.oauth.protocol import finish_revocations

        await finish_revocations(bindings)
    return {"principal": args.principal, "kind": args.kind, args.operators_command: done}


def cmd_operators(args: argparse.Namespace) -> int:
    if args.wrangler:
        return cmd_wrangler(args)
    tenants = _tenants(args)
    result = run_with(open_runtime(args), lambda runtime: _run(args, tenants, runtime))
    print(json.dumps(result, indent=2))
    return 0


def register(sub: Any) -> None:
    operators = sub.add_parser("operators", help="tenant grants of Access identities")
    actions = operators.add_subparsers(dest="operators_command", required=True, metavar="ACTION")
    for name, text in (("grant", "let an identity operate tenants"), ("revoke", "take it back")):
        action = command(actions, name, cmd_operators, text)
        action.add_argument("principal", help="email, service-token common name or group")
        action.add_argument("--kind", choices=("email", "common_name", "group"), default="email")
        action.add_argument("--tenant", action="append", help="a tenant (repeatable)")
        action.add_argument(
            "--platform-admin", action="store_true", help="every tenant and cross-tenant routes"
        )
        action.add_argument(
            "--wrangler",
            action="store_true",
            help="print the wrangler command for a deployed Worker's D1 instead",
        )
        action.add_argument(
            "--database",
            default=DEFAULT_DATABASE,
            help=f"D1 database name (with --wrangler; default {DEFAULT_DATABASE})",
        )
