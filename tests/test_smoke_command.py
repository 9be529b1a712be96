"""`agent-memory smoke` (the README's last deploy step) against the local dev server.

The dev server runs in a thread on loopback, the proxied tool's upstream is a second
loopback server, and Cloudflare Access at the edge is modelled by a third (`AccessEdge`:
it exchanges a service token's `CF-Access-Client-Id`/`-Secret` for a signed Access JWT,
or sends the caller to the login page). Credentials are made the way the README makes
them: the gateway CLI for the tenant, API key, credential and tool, `operators grant
--wrangler`'s SQL for the service token's grant, the dev Access key pair for Access JWTs.
Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

from local_runtime.access_dev import DevAccessKeys, access_claims, mint_token
from local_runtime.cli import main as cli_main
from local_runtime.memory_tokens_dev import dev_token_keys, issue_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import free_port, running_server, serving_in_thread
from local_runtime.state import StateDir
from tests.fakes.embedder import HashingEmbedder
from tests.gateway.loopback import running_upstream

CHECKS = [
    "healthz",
    "memory.working",
    "memory.episodic",
    "memory.semantic",
    "agent.run",
    "tool.call",
    "mcp",
    "scheduled",
    "cleanup",
]
CREDENTIAL_VARS = (
    "AGENT_MEMORY_MEMORY_TOKEN",
    "AGENT_MEMORY_TOKEN",
    "CF_ACCESS_CLIENT_ID",
    "CF_ACCESS_CLIENT_SECRET",
    "AGENT_MEMORY_API_KEY",
)
UPSTREAM_SECRET = "upstream-credential-7f3a9c"


@dataclass
class Worker:
    base: str
    state: Path
    runtime: LocalRuntime


@dataclass
class Result:
    code: int
    out: str
    lines: list[str]
    summary: dict[str, Any]

    def status(self, name: str) -> str:
        return next(c["status"] for c in self.summary["checks"] if c["name"] == name)

    def detail(self, name: str) -> str:
        return next(c["detail"] for c in self.summary["checks"] if c["name"] == name)


@pytest.fixture(autouse=True)
def no_credentials_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Worker]:
    state = tmp_path / "state"
    runtime = LocalRuntime.open(state, embedder=HashingEmbedder())
    with running_server(runtime) as base:
        yield Worker(base, state, runtime)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli_main(list(argv)) == 0
    return capsys.readouterr().out


def smoke(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    capsys.readouterr()
    code = cli_main(["smoke", *argv])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    return Result(code, out, lines, json.loads(lines[-1]))


def gateway_setup(
    capsys: pytest.CaptureFixture[str], state: Path, upstream: str, tmp_path: Path
) -> str:
    """Tenant `smoke` with memory tools, an API key, a credential and a tool `echo`, as the
    README does it; returns the API key."""
    s = ["--state", str(state)]
    cli(capsys, "gateway", "tenant", "create", "smoke", "--memory", *s)
    api_key = cli(capsys, "gateway", "key", "issue", "smoke", *s).strip().splitlines()[-1]
    secret = tmp_path / "cred.txt"
    secret.write_text(UPSTREAM_SECRET)
    cli(capsys, "gateway", "credential", "set", "smoke", "loop", "--from-file", str(secret), *s)
    tool = tmp_path / "tool.json"
    tool.write_text(
        json.dumps(
            {
                "name": "echo",
                "description": "Loopback echo",
                "provider": "loop",
                "url": f"{upstream}/echo",
                "method": "POST",
                "auth": {"type": "header", "name": "Authorization", "prefix": "Bearer "},
                "input_schema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            }
        )
    )
    cli(capsys, "gateway", "tool", "register", "smoke", str(tool), *s)
    return api_key


def rows_containing(state: Path, needle: str) -> list[str]:
    """Every stored value under the state folder that contains `needle`: each row of each
    table of each SQLite file (KV, D1, vectors, alarms, Durable Objects), and cold files."""
    found = []
    for path in sorted(state.rglob("*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        if path.suffix == ".sqlite":
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = [
                    r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                ]
                for table in tables:
                    for row in db.execute(f'SELECT * FROM "{table}"'):
                        if needle in repr(row) or needle.encode() in repr(row).encode():
                            found.append(f"{path.name}:{table}: {repr(row)[:160]}")
            finally:
                db.close()
        elif needle.encode() in path.read_bytes():
            found.append(str(path))
    return found


# --- Cloudflare Access at the edge, modelled ----------------------------------------------

Message = MutableMapping[str, Any]
GATED = ("/v1/agents/", "/admin/")
LOGIN = "https://smoke-team.cloudflareaccess.com/cdn-cgi/access/login/worker"
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}


class AccessEdge:
    """An ASGI stand-in for Cloudflare Access in front of the Worker, for the gated paths.

    A request with this service token's id and secret is forwarded with a fresh Access JWT
    (`common_name` = the client id, signed with the state folder's dev Access key, as the
    real edge signs with the team key); any other request to a gated path is sent to the
    login page, as Access does. The credential headers never reach the origin, and
    client-sent `Cf-Access-Jwt-Assertion` headers are dropped (the edge sets its own).
    Records any service-token secret sent to a path outside the application.
    """

    def __init__(self, origin: str, access_dir: Path, client_id: str, secret: str) -> None:
        self.origin, self.access_dir = origin, access_dir
        self.client_id, self.secret = client_id, secret
        self.exchanged = 0
        self.secret_outside_application: list[str] = []

    async def __call__(
        self,
        scope: Message,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        path: str = scope["path"]
        offered = (headers.get("cf-access-client-id"), headers.get("cf-access-client-secret"))
        forward = {
            k: v
            for k, v in headers.items()
            if k not in HOP_HEADERS and not k.startswith("cf-access-")
        }
        if path.startswith(GATED):
            if offered != (self.client_id, self.secret):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 302,
                        "headers": [(b"location", LOGIN.encode())],
                    }
                )
                await send({"type": "http.response.body", "body": b""})
                return
            claims = access_claims("unused", now=time.time())
            del claims["email"]
            claims["common_name"] = self.client_id
            claims["sub"] = ""
            forward["cf-access-jwt-assertion"] = DevAccessKeys.load_or_create(self.access_dir).sign(
                claims
            )
            self.exchanged += 1
        elif offered[1] is not None:
            self.secret_outside_application.append(path)
        target = scope["raw_path"].decode() + (
            "?" + scope["query_string"].decode() if scope.get("query_string") else ""
        )
        async with httpx.AsyncClient() as client:
            answer = await client.request(
                scope["method"], self.origin + target, headers=forward, content=body
            )
        await send(
            {
                "type": "http.response.start",
                "status": answer.status_code,
                "headers": [
                    (k.encode(), v.encode())
                    for k, v in answer.headers.items()
                    if k.lower() not in HOP_HEADERS | {"content-encoding"}
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer.content})


# --- tests ---------------------------------------------------------------------------------


def test_with_every_credential_every_check_passes_and_the_run_leaves_nothing_behind(
    worker: Worker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    with running_upstream() as upstream:
        api_key = gateway_setup(capsys, worker.state, upstream, tmp_path)
        # `agent-memory token` is the local stand-in for `cloudflared access token`.
        access = cli(capsys, "token", "--email", "ops@example.com", "--state", str(worker.state))
        access_token = access.strip().splitlines()[-1]
        monkeypatch.setenv("AGENT_MEMORY_TOKEN", access_token)
        monkeypatch.setenv("AGENT_MEMORY_API_KEY", api_key)
        result = smoke(
            capsys, worker.base, "--tool", "echo", "--tool-args", '{"text": "hello"}', "--wait", "0"
        )

    assert result.code == 0, result.out
    assert [(c["name"], c["status"]) for c in result.summary["checks"]] == [
        (name, "PASS") for name in CHECKS
    ]
    # One line per check, in order, then the summary, then the JSON.
    assert [line.split(":")[0] for line in result.lines[2:-2]] == [f"PASS {n}" for n in CHECKS]
    assert result.lines[-2] == "summary: 9 passed, 0 failed, 0 skipped"
    assert "search found it with score 0." in result.detail("memory.semantic")
    assert "upstream answered HTTP 200" in result.detail("tool.call")
    assert "tools/list: 3 tool(s)" in result.detail("mcp")  # echo + the two memory tools
    assert "revoked the minted memory token" in result.detail("cleanup")
    assert result.summary["credentials"] == ["access_token", "api_key", "memory_token"]
    assert "Access token ($AGENT_MEMORY_TOKEN)" in result.lines[1]
    for secret in (access_token, api_key, UPSTREAM_SECRET):
        assert secret not in result.out

    marker = result.summary["run"]
    assert marker.startswith("smoke-") and marker in result.detail("memory.working")
    assert rows_containing(worker.state, marker) == []
    # ...while the data was really written: the erase reports what it removed.
    assert "runs 1" in result.detail("cleanup") and "episodes" in result.detail("cleanup")


def test_without_credentials_the_protected_checks_skip_and_the_run_succeeds(
    worker: Worker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = smoke(capsys, worker.base)
    monkeypatch.setenv("CF_ACCESS_CLIENT_ID", "0a1b2c.access")
    half_a_service_token = smoke(capsys, worker.base)

    assert result.code == 0, result.out
    statuses = {c["name"]: c["status"] for c in result.summary["checks"]}
    assert statuses == {
        "healthz": "PASS",
        "memory.working": "SKIP",
        "memory.episodic": "SKIP",
        "memory.semantic": "SKIP",
        "agent.run": "SKIP",
        "tool.call": "SKIP",
        "mcp": "SKIP",
        "scheduled": "SKIP",  # it needs a platform admin's Access token
        "cleanup": "SKIP",
    }
    # Each SKIP says how to enable the check.
    assert "$AGENT_MEMORY_MEMORY_TOKEN" in result.detail("memory.working")
    assert "$CF_ACCESS_CLIENT_ID" in result.detail("agent.run")
    assert "--tool NAME" in result.detail("tool.call")
    assert "$AGENT_MEMORY_API_KEY" in result.detail("mcp")
    assert "platform admin" in result.detail("scheduled")
    assert "$AGENT_MEMORY_TOKEN" in result.detail("scheduled")
    assert result.lines[-2] == "summary: 1 passed, 0 failed, 8 skipped"
    assert result.summary["ok"] is True
    assert half_a_service_token.code == 0
    assert half_a_service_token.status("agent.run") == "SKIP"
    assert "give --access-client-secret / $CF_ACCESS_CLIENT_SECRET too" in (
        half_a_service_token.detail("agent.run")
    )


def test_healthz_fails_when_the_worker_runs_another_pydantic_than_this_checkout(
    worker: Worker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the deploy uploaded is what the tests ran (docs/pyodide.md "Versions"): the
    smoke check compares the Worker's pydantic with this checkout's pin."""
    assert f"pydantic {pydantic.VERSION}" in smoke(capsys, worker.base).detail("healthz")
    monkeypatch.setattr("local_runtime.commands.smoke.agent_checks.PYDANTIC", "2.10.6")
    result = smoke(capsys, worker.base)
    assert result.status("healthz") == "FAIL"
    assert f"runs pydantic {pydantic.VERSION}, this checkout 2.10.6" in result.detail("healthz")


def test_a_wrong_memory_token_fails_the_memory_checks_with_the_reason(
    worker: Worker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Well formed, for this tenant and agent, but signed with another deployment's key.
    wrong = issue_token(
        dev_token_keys(StateDir.create(tmp_path / "other")),
        "smoke",
        "smoke",
        tiers=["working", "episodic", "semantic"],
        scopes=["read", "write"],
        ttl=600,
    )
    access_token = mint_token(worker.state / "access", "ops@example.com", now=time.time())

    alone = smoke(capsys, worker.base, "--memory-token", wrong)
    with_access = smoke(
        capsys, worker.base, "--memory-token", wrong, "--access-token", access_token
    )

    for result in (alone, with_access):
        assert result.code == 1
        for name in ("memory.working", "memory.episodic", "memory.semantic"):
            assert result.status(name) == "FAIL"
            assert "memory token was refused: HTTP 401 memory_token_invalid" in result.detail(name)
        assert wrong not in result.out and access_token not in result.out
        assert result.summary["ok"] is False
    # The other checks still run: the agent run passes and is erased again.
    assert with_access.status("agent.run") == "PASS"
    assert with_access.status("cleanup") == "PASS"
    assert rows_containing(worker.state, with_access.summary["run"]) == []


def test_the_scheduled_check_skips_for_an_identity_that_is_no_platform_admin(
    worker: Worker, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant_operator = mint_token(worker.state / "access", "eve@example.com", now=time.time())
    result = smoke(capsys, worker.base, "--access-token", tenant_operator)
    assert result.status("scheduled") == "SKIP", result.out
    assert "--platform-admin" in result.detail("scheduled")


def test_a_service_token_goes_through_the_access_edge_once_granted_by_the_printed_sql(
    worker: Worker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    client_id, secret = "0a1b2c3d4e5f.access", "service-token-secret-5e6f"
    edge = AccessEdge(worker.base, worker.state / "access", client_id, secret)
    monkeypatch.setenv("CF_ACCESS_CLIENT_ID", client_id)
    monkeypatch.setenv("CF_ACCESS_CLIENT_SECRET", secret)

    def run_sql(printed: str) -> None:
        # `npx wrangler d1 execute agent-memory --remote --command "<SQL>"`, run here on the
        # local D1 file instead of the deployed database.
        for line in printed.strip().splitlines():
            words = shlex.split(line)
            assert words[:6] == ["npx", "wrangler", "d1", "execute", "agent-memory", "--remote"]
            assert words[6] == "--command"
            with sqlite3.connect(worker.state / "d1.sqlite") as db:
                db.executescript(words[7])

    with serving_in_thread(edge, lifespan="off") as front:
        # Not granted yet: the Worker names what is missing and how to grant it.
        refused = smoke(capsys, front)
        assert refused.code == 1
        assert refused.status("agent.run") == "FAIL"
        assert "tenant_forbidden" in refused.detail("agent.run")
        assert "operators grant" in refused.detail("agent.run")

        grant = ["operators", "grant", client_id, "--kind", "common_name", "--tenant", "smoke"]
        run_sql(cli(capsys, *grant, "--wrangler"))
        granted = smoke(capsys, front)

        monkeypatch.setenv("CF_ACCESS_CLIENT_SECRET", "not-the-secret")
        wrong_secret = smoke(capsys, front)

    assert granted.code == 0, granted.out
    for name in ("memory.working", "memory.episodic", "memory.semantic", "agent.run", "cleanup"):
        assert granted.status(name) == "PASS", granted.out
    # The local scheduled route takes an Access token only (no edge exchanges service tokens).
    assert granted.status("scheduled") == "SKIP"
    assert granted.summary["credentials"] == ["client_id", "client_secret", "memory_token"]
    assert edge.exchanged > 0 and edge.secret_outside_application == []
    assert rows_containing(worker.state, granted.summary["run"]) == []

    assert wrong_secret.code == 1
    assert "sent the request to its login page" in wrong_secret.detail("agent.run")
    for result in (refused, granted, wrong_secret):
        assert secret not in result.out


def test_an_unreachable_worker_fails_healthz_and_skips_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = smoke(capsys, f"http://127.0.0.1:{free_port()}", "--timeout", "5")

    assert result.code == 1
    assert result.status("healthz") == "FAIL"
    assert "no answer from 127.0.0.1" in result.detail("healthz")
    assert {c["status"] for c in result.summary["checks"][1:]} == {"SKIP"}


def test_operators_revoke_wrangler_prints_sql_that_removes_the_grant(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    cli(capsys, "migrate", "--state", str(state))
    who = ["O'Hara@Example.com", "--tenant", "acme", "--tenant", "globex"]
    printed = {
        action: [
            shlex.split(line)[7]
            for line in cli(capsys, "operators", action, *who, "--wrangler").splitlines()
        ]
        for action in ("grant", "revoke")
    }
    with sqlite3.connect(state / "d1.sqlite") as db:
        for sql in printed["grant"] * 2:  # idempotent, like the local grant
            db.executescript(sql)
        rows = db.execute(
            "SELECT tenant_id, principal_kind, principal FROM operator_grants"
        ).fetchall()
        assert sorted(rows) == [
            ("acme", "email", "o'hara@example.com"),
            ("globex", "email", "o'hara@example.com"),
        ]
        for sql in printed["revoke"]:
            db.executescript(sql)
        assert db.execute("SELECT count(*) FROM operator_grants").fetchone() == (0,)


def test_every_agent_memory_command_of_the_readme_deploy_section_parses() -> None:
    from local_runtime.cli import build_parser
    from tests.conftest import PROJECT_ROOT

    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme.split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]
    commands = []
    for raw in section.splitlines():
        line = raw.strip().lstrip("#").strip()
        if not line.startswith("uv run agent-memory "):
            continue
        line = line.split(" | ")[0].split(" > ")[0].split("  #")[0]
        commands.append(shlex.split(line.replace("$CF_ACCESS_CLIENT_ID", "x.access"))[3:])
    assert len(commands) >= 6  # operators, gateway, smoke
    assert {c[0] for c in commands} >= {"operators", "gateway", "smoke"}
    parser = build_parser()
    for argv in commands:
        args = parser.parse_args(argv)  # exits (fails the test) on an unknown flag
        assert callable(args.func)
        if "--wrangler" in argv:
            assert args.wrangler is True
