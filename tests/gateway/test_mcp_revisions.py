"""The revisions /mcp serves side by side: 2025-06-18, 2025-11-25 and the stateless 2026-07-28
(per-request `_meta`, `server/discover`, `resultType`, header checks), decided per request."""

from __future__ import annotations

from typing import Any

from tests.gateway.conftest import Seeded

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}


def _headers(method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


async def _modern(
    seeded: Seeded, method: str, params: dict[str, Any], headers: dict[str, str] | None = None
) -> Any:
    name = params.get("name")
    return await seeded.gateway.rpc(
        method,
        {**params, "_meta": META},
        key=seeded.key,
        headers=headers if headers is not None else _headers(method, name),
    )


async def test_server_discover_answers_without_any_handshake(seeded: Seeded) -> None:
    response = await _modern(seeded, "server/discover", {})
    assert response.status == 200, response.body
    result = response.json()["result"]
    assert result["supportedVersions"] == ["2025-06-18", "2025-11-25", MODERN]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "private"
    assert result["ttlMs"] > 0
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "agent-memory-gateway"


async def test_modern_tools_list_and_call_carry_the_2026_result_fields(seeded: Seeded) -> None:
    listed = (await _modern(seeded, "tools/list", {})).json()["result"]
    assert {t["name"] for t in listed["tools"]} == {"echo", "list_issues"}
    assert (listed["resultType"], listed["cacheScope"]) == ("complete", "private")
    called = await _modern(seeded, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    result = called.json()["result"]
    assert result["isError"] is False
    assert result["resultType"] == "complete"
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]


async def test_modern_requests_must_agree_with_their_headers(seeded: Seeded) -> None:
    wrong_method = await _modern(seeded, "tools/list", {}, _headers("tools/call"))
    assert (wrong_method.status, wrong_method.json()["error"]["code"]) == (400, -32020)
    wrong_name = await _modern(
        seeded, "tools/call", {"name": "echo", "arguments": {}}, _headers("tools/call", "other")
    )
    assert wrong_name.json()["error"]["code"] == -32020
    no_meta = await seeded.gateway.rpc(
        "tools/list", {}, key=seeded.key, headers=_headers("tools/list")
    )
    assert (no_meta.status, no_meta.json()["error"]["code"]) == (400, -32602)
    for meta in (5, "io.modelcontextprotocol/protocolVersion", [META]):
        bad_meta = await seeded.gateway.rpc(
            "tools/list", {"_meta": meta}, key=seeded.key, headers=_headers("tools/list")
        )
        assert (bad_meta.status, bad_meta.json()["error"]["code"]) == (400, -32602)


async def test_an_unsupported_modern_version_names_the_served_ones(seeded: Seeded) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2027-01-01"}
    response = await seeded.gateway.rpc(
        "tools/list",
        {"_meta": meta},
        key=seeded.key,
        headers=_headers("tools/list", version="2027-01-01"),
    )
    assert response.status == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2027-01-01"
    assert MODERN in error["data"]["supported"]


async def test_initialize_and_ping_do_not_exist_in_2026(seeded: Seeded) -> None:
    for method in ("initialize", "ping"):
        response = await _modern(seeded, method, {})
        assert (response.status, response.json()["error"]["code"]) == (404, -32601), method


async def test_server_discover_is_unknown_to_handshake_clients(seeded: Seeded) -> None:
    response = await seeded.gateway.rpc("server/discover", {}, key=seeded.key)
    assert response.json()["error"]["code"] == -32601


async def test_bad_arguments_are_a_tool_error_from_2025_11_25_and_a_protocol_error_before(
    seeded: Seeded,
) -> None:
    params = {"name": "echo", "arguments": {"text": 5}}
    old = await seeded.gateway.rpc(
        "tools/call", params, key=seeded.key, headers={"MCP-Protocol-Version": "2025-06-18"}
    )
    assert old.json()["error"]["code"] == -32602
    new = await seeded.gateway.rpc(
        "tools/call", params, key=seeded.key, headers={"MCP-Protocol-Version": "2025-11-25"}
    )
    result = new.json()["result"]
    assert result["isError"] is True
    assert "invalid_tool_input" in result["content"][0]["text"]
