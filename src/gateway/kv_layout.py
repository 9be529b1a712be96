"""Where the gateway keeps its state in KV, and which names are allowed.

| key                                  | value (JSON)                                  |
|--------------------------------------|-----------------------------------------------|
| `gw:tenant:{tenant}`                 | `TenantRecord`: status, memory_enabled        |
| `gw:apikey:{sha256 hex of the key}`  | `ApiKeyRecord`: tenant, key_id, scopes, status|
| `gw:keyid:{tenant}:{key_id}`         | `ApiKeyIndexEntry`: the hash, label, status   |
| `gw:cred:{tenant}:{provider}`        | `Credential`: the secret for that provider    |
| `gw:tool:{tenant}:{tool}`            | `ToolConfig`: upstream, auth, schema, limits  |

Keys never hold an API key in clear (only its SHA-256). Names are restricted so that every
key stays far below KV's 512-byte limit and no name can contain the `:` separator.
"""

from __future__ import annotations

import re

PREFIX = "gw:"

TENANT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
# MCP clients accept tool names of letters, digits, `_`, `-` and `.`; 64 keeps them readable.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
KEY_ID_RE = re.compile(r"^k_[0-9a-f]{16}$")
SHA256_HEX_RE = re.compile(r"^[0-9a-f]{64}$")


def tenant_key(tenant: str) -> str:
    return f"gw:tenant:{tenant}"


def api_key_key(sha256_hex: str) -> str:
    return f"gw:apikey:{sha256_hex}"


def key_id_key(tenant: str, key_id: str) -> str:
    return f"gw:keyid:{tenant}:{key_id}"


def key_id_prefix(tenant: str) -> str:
    return f"gw:keyid:{tenant}:"


def credential_key(tenant: str, provider: str) -> str:
    return f"gw:cred:{tenant}:{provider}"


def tool_key(tenant: str, tool: str) -> str:
    return f"gw:tool:{tenant}:{tool}"


def tool_prefix(tenant: str) -> str:
    return f"gw:tool:{tenant}:"
