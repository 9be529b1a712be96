"""`tokens issue`: mint an agent-scoped memory token the local runtime accepts.

Signed with the state folder's dev key (`local_runtime.memory_tokens_dev`); a deployed
Worker mints through `POST /admin/tenants/{tenant}/memory-tokens` instead. The token is the
last line printed: `TOKEN=$(agent-memory tokens issue acme agent-a | tail -n1)`.
"""

from __future__ import annotations

import argparse
from typing import Any

from agent_memory.namespace import API_AGENT_TYPE
from local_runtime.commands.common import command

TIERS = ("working", "episodic", "semantic", "procedural")
SCOPES = ("read", "write")


def _names(raw: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    bad = [n for n in names if n not in allowed]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"{what} must be a comma list of {', '.join(allowed)}")
    return list(dict.fromkeys(names))


def cmd_issue(args: argparse.Namespace) -> int:
    from agent_memory.namespace import AGENT_TYPE_RE, is_instance, is_tenant
    from local_runtime.memory_tokens_dev import dev_token_keys, issue_token
    from local_runtime.state import StateDir

    if not is_tenant(args.tenant) or not is_instance(args.agent_id):
        print("error: TENANT or AGENT_ID is malformed")
        return 2
    if not AGENT_TYPE_RE.fullmatch(args.agent_type):
        print("error: --agent-type is malformed")
        return 2
    if not 60 <= args.ttl <= 30 * 86_400:
        print("error: --ttl must be between 60 seconds and 30 days")
        return 2
    state = StateDir.create(args.state)
    token = issue_token(
        dev_token_keys(state),
        args.tenant,
        args.agent_id,
        tiers=args.tiers,
        scopes=args.scopes,
        ttl=args.ttl,
        agent_type=args.agent_type,
    )
    print(f"# memory token for agent {args.agent_type}/{args.agent_id} of tenant {args.tenant}:")
    print(f"# tiers {','.join(args.tiers)}, scopes {','.join(args.scopes)}, {args.ttl} s.")
    print("# Send it as `Authorization: Bearer <token>` to /api/v1/memory/{agent_id}.")
    print(token)
    return 0


def register(sub: Any) -> None:
    tokens = sub.add_parser("tokens", help="agent-scoped memory tokens")
    actions = tokens.add_subparsers(dest="tokens_command", required=True, metavar="ACTION")
    issue = command(
        actions, "issue", cmd_issue, "mint a memory token for one agent", "tenant", "agent_id"
    )
    issue.add_argument(
        "--agent-type",
        default=API_AGENT_TYPE,
        help=f"the agent's type: a runtime agent's memory is its type's (default {API_AGENT_TYPE},"
        " an agent that exists only through the memory API)",
    )
    issue.add_argument(
        "--tiers",
        type=lambda raw: _names(raw, TIERS, "--tiers"),
        default=list(TIERS),
        help="comma list of tiers (default all four)",
    )
    issue.add_argument(
        "--scopes",
        type=lambda raw: _names(raw, SCOPES, "--scopes"),
        default=list(SCOPES),
        help="read, write or read,write (default both)",
    )
    issue.add_argument("--ttl", type=int, default=3600, help="seconds (60 s to 30 days)")
