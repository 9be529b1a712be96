"""`agent-memory oauth ...`: a tenant's connected OAuth clients (docs/gateway.md "OAuth"):
`clients` lists the live grants (JSON), `revoke` ends one with its tokens.

Acts on the local runtime's D1 and KV. On a deployed Worker, use the Access-gated admin
routes instead (`GET` / `DELETE /admin/tenants/{tenant}/oauth-clients[/{grant_id}]`): a
revocation must delete access-token records from KV and refresh tokens from D1 together,
which a single `wrangler` command cannot do.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from local_runtime.commands.common import command, open_runtime, run_with


async def _run(args: argparse.Namespace, runtime: Any) -> Any:
    from worker.oauth.protocol import list_connected, revoke_connected

    bindings = runtime.bindings()
    if args.oauth_command == "clients":
        return {"tenant": args.tenant, "clients": await list_connected(bindings, args.tenant)}
    revoked = await revoke_connected(bindings, args.tenant, args.grant_id, "cli")
    return {"tenant": args.tenant, "grant_id": args.grant_id, "revoked": revoked}


def cmd_oauth(args: argparse.Namespace) -> int:
    result = run_with(open_runtime(args), lambda runtime: _run(args, runtime))
    print(json.dumps(result, indent=2))
    return 0 if result.get("revoked", True) else 1


def register(sub: Any) -> None:
    oauth = sub.add_parser("oauth", help="a tenant's connected OAuth clients")
    actions = oauth.add_subparsers(dest="oauth_command", required=True, metavar="ACTION")
    command(actions, "clients", cmd_oauth, "list a tenant's connected clients", "tenant")
    command(actions, "revoke", cmd_oauth, "revoke a connected client's grant", "tenant", "grant_id")
