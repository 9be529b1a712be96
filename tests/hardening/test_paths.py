"""Finding 2 of issue 14: path handling. Decoded control characters are refused, never
dropped; ids are full-matched; `{subject}` is percent-decoded exactly once; a Host header
cannot rewrite the path. Driven over real loopback HTTP, where the bugs lived."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from bindings.ports.clock import FixedClock
from gateway import admin_ops
from http_messages import ApiError
from local_runtime.access_dev import mint_token
from local_runtime.adapters.kv import SqliteKV
from local_runtime.runtime import LocalRuntime
from worker.app import ROUTES
from worker.identity import ACCESS_HEADER
from worker.routing import Router


def auth(rt: LocalRuntime) -> dict[str, str]:
    return {ACCESS_HEADER: mint_token(rt.state.access, "ops@example.com", now=rt.clock.now())}


@pytest.mark.parametrize("encoded", ["%0A", "%0D", "%09", "%00", "%7F", "%C2%85"])
def test_control_characters_in_a_tenant_are_refused_not_dropped(
    agent_runtime: LocalRuntime, served: str, encoded: str
) -> None:
    headers = auth(agent_runtime)
    ran = httpx.post(f"{served}/v1/agents/t-b/assistant/run", json={"input": "hi"}, headers=headers)
    assert ran.status_code == 200, ran.text
    response = httpx.get(f"{served}/admin/agents/t-{encoded}b/runs", headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_path"
    # The refusal is not "tenant t-b": its run is untouched and only readable by its name.
    assert len(httpx.get(f"{served}/admin/agents/t-b/runs", headers=headers).json()["runs"]) == 1


def test_a_trailing_newline_does_not_pass_as_a_tenant(
    agent_runtime: LocalRuntime, served: str
) -> None:
    response = httpx.get(f"{served}/admin/agents/acme%0A/runs", headers=auth(agent_runtime))
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_path")


async def test_admin_ops_refuse_a_tenant_with_a_trailing_newline() -> None:
    clock = FixedClock()
    kv = SqliteKV(":memory:", clock=clock)
    try:
        with pytest.raises(admin_ops.AdminError):
            await admin_ops.create_tenant(kv, clock, "acme\n")
        assert (await kv.list(prefix="")).keys == []
    finally:
        kv.close()


def test_the_erase_subject_is_decoded_exactly_once(
    agent_runtime: LocalRuntime, served: str
) -> None:
    response = httpx.delete(
        f"{served}/admin/tenants/acme/subjects/ab%2525cd", headers=auth(agent_runtime)
    )
    assert response.status_code == 200, response.text
    assert response.json()["subject"] == "ab%25cd"


def test_an_encoded_slash_stays_inside_the_subject(
    agent_runtime: LocalRuntime, served: str
) -> None:
    response = httpx.delete(
        f"{served}/admin/tenants/acme/subjects/a%2Fb%20c", headers=auth(agent_runtime)
    )
    assert response.status_code == 200, response.text
    assert response.json()["subject"] == "a/b c"


def test_a_host_header_cannot_rewrite_the_path(agent_runtime: LocalRuntime, served: str) -> None:
    headers = {**auth(agent_runtime), "Host": "x/admin/agents/BAD!/runs?"}
    response = httpx.get(f"{served}/admin/agents/acme/runs", headers=headers)
    assert response.status_code == 200, response.text


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """`caplog`, also fed by uvicorn's loggers (they do not propagate to the root)."""
    uvicorn_log = logging.getLogger("uvicorn")
    uvicorn_log.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG)
    try:
        yield caplog
    finally:
        uvicorn_log.removeHandler(caplog.handler)


LONG = "a" * 256
LONG_ENCODED = "%C3%A9" * 50  # 300 bytes as sent, 50 characters decoded


@pytest.mark.parametrize(
    ("path", "statuses"),
    [
        (f"/{LONG}", (404,)),
        (f"/admin/{LONG}", (404,)),
        (f"/admin/ui/{LONG_ENCODED}", (404,)),
        (f"/admin/tenants/acme/subjects/{LONG}/archive", (200,)),
        (f"/admin/tenants/acme/subjects/{'b' * 4000}/archive", (422,)),
    ],
)
def test_a_segment_longer_than_a_file_name_is_json_and_not_logged(
    agent_runtime: LocalRuntime,
    served: str,
    all_logs: pytest.LogCaptureFixture,
    path: str,
    statuses: tuple[int, ...],
) -> None:
    """Issue 26 item 3: locally, the static-asset lookup stat()ed a segment over 255 bytes
    (ENAMETOOLONG), answered a text/plain 500 and logged the raw path in the traceback."""
    response = httpx.get(f"{served}{path}", headers=auth(agent_runtime))
    assert response.headers["content-type"] == "application/json", response.text
    assert response.status_code in statuses, response.text
    segment = max(path.split("/"), key=len)
    assert segment not in all_logs.text


@pytest.mark.parametrize("path", ["/healthz\n", "/admin/agents/acme/runs\n"])
def test_a_trailing_newline_does_not_match_a_route(path: str) -> None:
    """Route patterns are full-matched: `re.match("^...$")` lets a trailing newline pass."""
    with pytest.raises(ApiError) as refused:
        Router(ROUTES).resolve("GET", path)
    assert refused.value.code == "not_found"
