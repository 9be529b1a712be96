"""Dev signing keys for agent memory tokens, kept in the state folder.

`dev_token_keys(state)` returns the JSON the Worker reads from its `MEMORY_TOKEN_KEYS`
secret: created on first use (`{"dev-1": <random 43 chars>}`) in
`{state}/access/memory-token-keys.json`, so `agent-memory dev` and
`agent-memory tokens issue` on one folder agree. `issue_token` mints with PyJWT — a
library independent of the Worker's verifier, so each checks the other.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

import jwt

from agent_memory.ids import new_ulid
from local_runtime.state import StateDir

KEYS_FILE = "memory-token-keys.json"


def dev_token_keys(state: StateDir) -> str:
    path: Path = state.root / "access" / KEYS_FILE
    if not path.exists():
        path.write_text(json.dumps({"dev-1": secrets.token_urlsafe(32)}))
        path.chmod(0o600)
    return path.read_text()


def issue_token(
    keys_json: str,
    tenant: str,
    agent_id: str,
    *,
    tiers: Sequence[str],
    scopes: Sequence[str],
    ttl: int,
    agent_type: str | None = None,
    now: float | None = None,
    kid: str | None = None,
) -> str:
    """An HS256 memory token signed with `kid` (default: the first key) of `keys_json`."""
    keys: dict[str, str] = json.loads(keys_json)
    kid = kid or next(iter(keys))
    issued = time.time() if now is None else now
    claims = {
        "iss": "agent-memory",
        "aud": "agent-memory-api",
        "tenant": tenant,
        "agent_id": agent_id,
        "tiers": list(tiers),
        "scopes": list(scopes),
        "iat": int(issued),
        "exp": int(issued) + ttl,
        "jti": new_ulid(issued),
    }
    if agent_type is not None:  # else the token is for a memory-API agent (`API_AGENT_TYPE`)
        claims["agent_type"] = agent_type
    return jwt.encode(claims, keys[kid], algorithm="HS256", headers={"kid": kid})
