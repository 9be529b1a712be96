"""The dev key-encryption key for personal data, kept in the state folder.

`dev_pii_keks(state)` returns what the Worker reads from its `MEMORY_PII_KEKS` secret
(`kid:base64key`): generated on first use (32 random bytes from `secrets`) into
`{state}/access/pii-keks` with mode 0600, so every command on one folder reads what the
others sealed. Never a fixed key in code: a fresh folder gets a fresh key.
"""

from __future__ import annotations

import base64
import secrets

from bindings.ports.crypto import KEY_BYTES
from local_runtime.state import StateDir

KEKS_FILE = "pii-keks"


def dev_pii_keks(state: StateDir) -> str:
    path = state.root / "access" / KEKS_FILE
    if not path.exists():
        key = base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii")
        path.write_text(f"dev-1:{key}")
        path.chmod(0o600)
    return path.read_text().strip()
