"""`token`: mint a Cloudflare Access token the local runtime accepts.

The token is signed with the state folder's dev key (created on first use), so a runtime
serving that folder verifies it with the same code that checks real Access tokens. The
token is the last line printed, so `TOKEN=$(agent-memory token ... | tail -n1)` works.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from local_runtime.commands.common import command


def cmd_token(args: argparse.Namespace) -> int:
    from local_runtime.access_dev import (
        DEV_AUD,
        DEV_TEAM_DOMAIN,
        mint_token,
    )
    from local_runtime.state import StateDir

    state = StateDir.create(args.state)
    token = mint_token(state.access, args.email, now=time.time(), ttl=args.ttl)
    print(f"# Access token for {args.email} (team {DEV_TEAM_DOMAIN}, aud {DEV_AUD}),")
    print(f"# valid {args.ttl} s for the local runtime using state {state.root}.")
    print("# Send it as the Cf-Access-Jwt-Assertion header.")
    print(token)
    return 0


def register(sub: Any) -> None:
    token = command(
        sub, "token", cmd_token, "mint a Cloudflare Access token the local runtime accepts"
    )
    token.add_argument("--email", required=True, help="the user the token identifies")
    token.add_argument(
        "--ttl", type=int, default=8 * 3600, help="seconds until it expires (default 8 h)"
    )
