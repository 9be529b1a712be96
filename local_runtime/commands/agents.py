"""`agents`: run agents and read their runs over HTTP, as an operator would.

Every command but `types` calls a running Worker's Access-gated routes (`--url`, default the
local runtime) with a token minted from the state folder's dev key (`--state`, `--email`) or
given (`--token` / `$AGENT_MEMORY_TOKEN`, a real Access token for a deployed Worker). Output is
the API's JSON; an API error goes to stderr with a non-zero exit status.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any

from local_runtime.commands.common import command

DEFAULT_URL = "http://127.0.0.1:8790"
DEFAULT_EMAIL = "operator@localhost"
TOKEN_ENV = "AGENT_MEMORY_TOKEN"


class ApiCallError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


def _token(args: argparse.Namespace) -> str:
    explicit = args.token or os.environ.get(TOKEN_ENV)
    if explicit:
        return str(explicit)
    from local_runtime.access_dev import mint_token
    from local_runtime.state import StateDir

    state = StateDir.create(args.state)
    return mint_token(state.access, args.email, now=time.time(), ttl=600)


def _request(
    args: argparse.Namespace,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> Any:
    import httpx

    from worker.identity import ACCESS_HEADER

    logging.getLogger("httpx").setLevel(logging.WARNING)  # keep stdout/stderr for results
    query = {k: v for k, v in (params or {}).items() if v is not None}
    headers = {ACCESS_HEADER: _token(args)}
    try:
        response = httpx.request(
            method,
            args.url.rstrip("/") + path,
            json=body,
            params=query,
            headers=headers,
            timeout=args.timeout,
        )
    except httpx.HTTPError as exc:
        raise ApiCallError(0, {"error": {"code": "unreachable", "message": str(exc)}}) from None
    try:
        data = response.json()
    except ValueError:
        data = {"error": {"code": "not_json", "message": response.text[:500]}}
    if response.status_code >= 400:
        raise ApiCallError(response.status_code, data)
    return data


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _run_command(args: argparse.Namespace) -> int:
    try:
        data = args.handler(args)
    except ApiCallError as exc:
        print(f"error: HTTP {exc.status}: {json.dumps(exc.body)}", file=sys.stderr)
        return 1
    _print(data)
    return 0


def cmd_types(args: argparse.Namespace) -> Any:
    from agent_memory.governance.agent_types import BUILT_IN as AGENT_TYPES

    return [
        {
            "name": agent.name,
            "description": agent.description,
            "tools": list(agent.tools),
            "memory": agent.memory.model_dump(),
            "step_limit": agent.step_limit,
            "timeout_seconds": agent.timeout_seconds,
            "task_types": sorted({w.task_type for w in agent.workflows}),
        }
        for agent in AGENT_TYPES.values()
    ]


def cmd_run(args: argparse.Namespace) -> Any:
    body: dict[str, Any] = {"input": args.text, "instance_id": args.instance}
    if args.task_type:
        body["task_type"] = args.task_type
    if args.subject:
        body["subject"] = args.subject
    return _request(args, "POST", f"/v1/agents/{args.tenant}/{args.agent_type}/run", body)


def cmd_runs(args: argparse.Namespace) -> Any:
    params = {"agent_type": args.agent_type, "status": args.status, "limit": args.limit}
    path = f"/admin/agents/{args.tenant}/runs"
    if not args.all:
        return _request(args, "GET", path, params={**params, "cursor": args.cursor})
    runs: list[Any] = []
    cursor = args.cursor
    while True:
        page = _request(args, "GET", path, params={**params, "cursor": cursor})
        runs.extend(page["runs"])
        cursor = page.get("next_cursor")
        if not cursor:
            return {"runs": runs, "next_cursor": None}


def cmd_show(args: argparse.Namespace) -> Any:
    return _request(args, "GET", f"/admin/agents/{args.tenant}/runs/{args.run_id}")


def cmd_outcome(args: argparse.Namespace) -> Any:
    path = f"/v1/agents/{args.tenant}/{args.agent_type}/runs/{args.run_id}/outcome"
    return _request(args, "POST", path, {"score": args.score, "instance_id": args.instance})


def cmd_workflows(args: argparse.Namespace) -> Any:
    base = f"/admin/agents/{args.tenant}/{args.agent_type}"
    params: dict[str, Any] = {"instance_id": args.instance, "task_type": args.task_type}
    if args.candidates:
        params.update(min_pulls=args.min_pulls, min_mean=args.min_mean)
        return _request(args, "GET", f"{base}/pack-candidates", params=params)
    return _request(args, "GET", f"{base}/workflows", params=params)


def register(sub: Any) -> None:
    agents = sub.add_parser("agents", help="run agents and read their runs (admin API)")
    commands = agents.add_subparsers(dest="agents_command", required=True, metavar="ACTION")

    def over_http(name: str, handler: Any, help: str, *positionals: str) -> Any:
        """A command over HTTP (every one but `types`): `--url`, `--token`, `--email`..."""
        parser = command(commands, name, _run_command, help, *positionals)
        parser.set_defaults(handler=handler)
        parser.add_argument(
            "--url", default=DEFAULT_URL, help=f"the Worker (default {DEFAULT_URL})"
        )
        parser.add_argument(
            "--token", help=f"an Access token to send (default ${TOKEN_ENV}, else mint a dev one)"
        )
        parser.add_argument(
            "--email", default=DEFAULT_EMAIL, help="who a minted dev token identifies"
        )
        parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
        return parser

    types = commands.add_parser("types", help="list the registered agent types")
    types.set_defaults(func=_run_command, handler=cmd_types)

    run = over_http("run", cmd_run, "run one agent turn", "tenant", "agent_type")
    run.add_argument("text", help="the turn's input")
    run.add_argument("--instance", default="default", help="agent instance id")
    run.add_argument("--task-type", help="task type (chooses the workflow bandit)")
    run.add_argument("--subject", help="what the turn is about, e.g. contact:hubspot:123")

    runs = over_http("runs", cmd_runs, "list a tenant's runs, newest first", "tenant")
    runs.add_argument("--agent-type")
    runs.add_argument("--status", choices=["running", "completed", "failed"])
    runs.add_argument("--limit", type=int, default=20)
    runs.add_argument("--cursor")
    runs.add_argument("--all", action="store_true", help="follow cursors to the last page")

    over_http("show", cmd_show, "one run with its episodes and run log", "tenant", "run_id")

    help = "score a run (0..1) for the workflow bandit"
    outcome = over_http("outcome", cmd_outcome, help, "tenant", "agent_type", "run_id")
    outcome.add_argument("score", type=float)
    outcome.add_argument("--instance", default="default")

    help = "the workflow bandit (or pack candidates)"
    workflows = over_http("workflows", cmd_workflows, help, "tenant", "agent_type")
    workflows.add_argument("--instance", default="default")
    workflows.add_argument("--task-type")
    workflows.add_argument("--candidates", action="store_true", help="only pack candidates")
    workflows.add_argument("--min-pulls", type=int, default=20)
    workflows.add_argument("--min-mean", type=float, default=0.7)
