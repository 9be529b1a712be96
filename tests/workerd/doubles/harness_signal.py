"""Test-only: tell the harness that something happened inside workerd.

Background work and alarms run after the request that started them has answered, so the
harness cannot await them through that request. Instead they POST a JSON note to the
harness's loopback signal server (`TIER_SIGNAL_URL`, a var only the harness sets) as their
last step; the harness awaits that note. No polling, no sleeps.
"""

from __future__ import annotations

import json
from typing import Any

from js import Object, fetch
from pyodide.ffi import to_js


async def signal(base_url: str, name: str, note: dict[str, Any]) -> None:
    """POST `note` to `<base_url>/<name>`; raises if the harness does not answer 200."""
    init = to_js(
        {
            "method": "POST",
            "body": json.dumps(note),
            "headers": {"content-type": "application/json"},
        },
        dict_converter=Object.fromEntries,
    )
    response = await fetch(f"{base_url}/{name}", init)
    if int(response.status) != 200:
        raise RuntimeError(f"the harness refused signal {name}: {response.status}")
