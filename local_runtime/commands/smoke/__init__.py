"""`smoke`: check a running Worker over HTTP, the last step of README "Deploy" (which lists
the checks, the credentials and their environment variables, and what cleanup deletes). Each
check prints PASS / FAIL / SKIP and why, then a summary and one JSON line; a check whose
credential was not given is SKIP, never FAIL; no credential is ever printed (`redact`); the
exit status is 1 when any check failed. What a run writes carries one marker,
`smoke-<UTC time>-<random>`, which `cleanup` erases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from local_runtime.commands.smoke.agent_checks import (
    check_agent_run,
    check_healthz,
    check_scheduled,
)
from local_runtime.commands.smoke.cleanup import cleanup
from local_runtime.commands.smoke.credentials import CREDENTIALS, Credentials, redact
from local_runtime.commands.smoke.gateway_checks import check_mcp, check_tool_call
from local_runtime.commands.smoke.memory_checks import (
    check_episodic,
    check_semantic,
    check_working,
    prepare_memory_token,
)
from local_runtime.commands.smoke.session import (
    DEFAULT_AGENT_TYPE,
    DEFAULT_CRON,
    DEFAULT_INSTANCE,
    DEFAULT_TENANT,
    Check,
    Session,
)

CHECKS = (
    ("memory.working", check_working),
    ("memory.episodic", check_episodic),
    ("memory.semantic", check_semantic),
    ("agent.run", check_agent_run),
    ("tool.call", check_tool_call),
    ("mcp", check_mcp),
    ("scheduled", check_scheduled),
    ("cleanup", cleanup),
)


def run(s: Session) -> list[Check]:
    """Every check in order; after a failed `healthz` the others are not tried."""
    s.record("healthz", lambda: check_healthz(s))
    if s.checks[-1].status == "FAIL":
        reason = "not tried: the Worker did not pass /healthz"
        s.checks.extend(Check(name, "SKIP", reason) for name, _ in CHECKS)
        return s.checks
    prepare_memory_token(s)
    for name, check in CHECKS:
        s.record(name, partial(check, s))
    return s.checks


def report(
    checks: list[Check], options: argparse.Namespace, marker: str, creds: Credentials
) -> tuple[list[str], int]:
    counts = {
        status: sum(c.status == status for c in checks) for status in ("PASS", "FAIL", "SKIP")
    }
    lines = [f"{c.status} {c.name}: {c.detail}" for c in checks]
    lines.append(
        f"summary: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
    )
    lines.append(
        json.dumps(
            {
                "base_url": options.base_url,
                "run": marker,
                "ok": counts["FAIL"] == 0,
                "passed": counts["PASS"],
                "failed": counts["FAIL"],
                "skipped": counts["SKIP"],
                "credentials": sorted(creds.sources),
                "checks": [
                    {"name": c.name, "status": c.status, "detail": c.detail} for c in checks
                ],
            },
            ensure_ascii=False,
        )
    )
    hidden = creds.secrets()
    return [redact(line, hidden) for line in lines], (1 if counts["FAIL"] else 0)


def cmd_smoke(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)  # request lines would clutter output
    creds = Credentials.from_args(args, dict(os.environ))
    smoke = Session(args, creds)
    print(redact(f"# smoke check of {args.base_url}, run {smoke.marker}", creds.secrets()))
    print(f"# credentials: {creds.describe()}")
    try:
        checks = run(smoke)
    finally:
        smoke.client.close()
    lines, status = report(checks, args, smoke.marker, creds)
    print("\n".join(lines))
    sys.stdout.flush()
    return status


# --- arguments ---------------------------------------------------------------------------


def _base_url(raw: str) -> str:
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError("BASE_URL must be http(s)://host[:port][/path]")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise argparse.ArgumentTypeError("BASE_URL must have no query, fragment or user info")
    return raw.strip().rstrip("/")


def _tool_args(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--tool-args is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--tool-args must be a JSON object")
    return value


def register(sub: Any) -> None:
    smoke = sub.add_parser(
        "smoke",
        help="check a running Worker (deployed or local) over HTTP",
        description=(
            "Exercise a running Worker over HTTP: healthz, memory write/read/search, an "
            "agent run, a tool call, MCP and the scheduled route; one PASS/FAIL/SKIP line "
            "per check, a summary, and a JSON last line. Exit status 1 if a check failed. "
            "Credentials: each flag or its environment variable (preferred: it keeps the "
            "secret out of shell history); checks without their credential SKIP."
        ),
    )
    smoke.add_argument("base_url", type=_base_url, metavar="BASE_URL")
    smoke.add_argument(
        "--tenant",
        help=f"tenant of the agent run and of a minted memory token (default: the memory "
        f"token's, else {DEFAULT_TENANT!r}); use one kept for smoke checks",
    )
    smoke.add_argument(
        "--instance",
        default=DEFAULT_INSTANCE,
        help=f"agent instance id for the run and a minted token (default {DEFAULT_INSTANCE})",
    )
    smoke.add_argument("--agent-type", default=DEFAULT_AGENT_TYPE)
    smoke.add_argument("--tool", help="a tool of the API key's tenant to call")
    smoke.add_argument(
        "--tool-args", type=_tool_args, default={}, help="the tool's arguments, a JSON object"
    )
    smoke.add_argument(
        "--cron", default=DEFAULT_CRON, help=f"cron to run locally (default {DEFAULT_CRON!r})"
    )
    smoke.add_argument(
        "--wait",
        type=float,
        default=30.0,
        help="seconds to wait for a write to become visible (KV, Vectorize: default 30)",
    )
    smoke.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    for attr, flag, env, what in CREDENTIALS:
        smoke.add_argument(flag, dest=attr, help=f"{what} (default ${env})")
    smoke.set_defaults(func=cmd_smoke)
