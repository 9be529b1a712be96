"""Operator operations: tenants, keys (shown once, stored hashed), credentials, tool configs."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from gateway import admin_ops, credentials
from gateway.credentials import hash_token
from tests.gateway.conftest import ECHO_TOOL, TENANT, Gateway, Seeded


async def _all_values(gw: Gateway) -> str:
    page = await gw.kv.list(prefix="")
    values = [await gw.kv.get(k.name) or "" for k in page.keys]
    return "\n".join([k.name for k in page.keys] + values)


async def test_issued_key_is_shown_once_and_stored_only_as_its_hash(seeded: Seeded) -> None:
    gw = seeded.gateway
    assert seeded.key.startswith("amk_") and len(seeded.key) > 40
    everything = await _all_values(gw)
    assert seeded.key not in everything
    assert credentials.api_key_key(hash_token(seeded.key)) in everything
    assert "api_key" not in repr(await admin_ops.list_api_keys(gw.kv, TENANT))


async def test_keys_are_unique_per_issue(gateway: Gateway) -> None:
    await admin_ops.create_tenant(gateway.kv, gateway.clock, "t1")
    keys = {(await admin_ops.issue_api_key(gateway.kv, gateway.clock, "t1")).api_key for _ in "abc"}
    assert len(keys) == 3


async def test_issue_key_for_unknown_tenant_is_refused(gateway: Gateway) -> None:
    with pytest.raises(admin_ops.AdminError, match="unknown tenant"):
        await admin_ops.issue_api_key(gateway.kv, gateway.clock, "ghost")


async def test_tenant_ids_are_checked_and_not_duplicated(gateway: Gateway) -> None:
    with pytest.raises(admin_ops.AdminError, match="invalid tenant id"):
        await admin_ops.create_tenant(gateway.kv, gateway.clock, "Bad:Tenant")
    await admin_ops.create_tenant(gateway.kv, gateway.clock, "t1")
    with pytest.raises(admin_ops.AdminError, match="already exists"):
        await admin_ops.create_tenant(gateway.kv, gateway.clock, "t1")
    assert [t.tenant for t in await admin_ops.list_tenants(gateway.kv)] == ["t1"]


async def test_scopes_are_validated(gateway: Gateway) -> None:
    await admin_ops.create_tenant(gateway.kv, gateway.clock, "t1")
    with pytest.raises(admin_ops.AdminError, match="scopes"):
        await admin_ops.issue_api_key(gateway.kv, gateway.clock, "t1", scopes=["admin"])
    issued = await admin_ops.issue_api_key(gateway.kv, gateway.clock, "t1", scopes=["memory"])
    assert issued.scopes == ("memory",)


async def test_revoke_is_idempotent_and_listed(seeded: Seeded) -> None:
    gw = seeded.gateway
    first = await admin_ops.revoke_api_key(gw.kv, gw.clock, TENANT, seeded.key_id)
    again = await admin_ops.revoke_api_key(gw.kv, gw.clock, TENANT, seeded.key_id)
    assert first.status == again.status == "revoked"
    listed = {k.key_id: k.status for k in await admin_ops.list_api_keys(gw.kv, TENANT)}
    assert listed[seeded.key_id] == "revoked"
    assert list(listed.values()).count("active") == 1  # the memory-only key
    with pytest.raises(admin_ops.AdminError, match="no API key"):
        await admin_ops.revoke_api_key(gw.kv, gw.clock, TENANT, "k_0000000000000000")


async def test_credentials_are_never_echoed_and_reject_header_injection(seeded: Seeded) -> None:
    gw = seeded.gateway
    result = await admin_ops.set_credential(gw.kv, gw.clock, TENANT, "echoer", "rotated")
    assert result is None
    with pytest.raises(admin_ops.AdminError, match="control characters"):
        await admin_ops.set_credential(gw.kv, gw.clock, TENANT, "echoer", "a\r\nX-Evil: 1")
    with pytest.raises(admin_ops.AdminError, match="invalid provider"):
        await admin_ops.set_credential(gw.kv, gw.clock, TENANT, "Bad Provider", "x")
    assert await admin_ops.delete_credential(gw.kv, TENANT, "echoer") is True
    assert await admin_ops.delete_credential(gw.kv, TENANT, "echoer") is False


async def test_register_and_list_tools(seeded: Seeded) -> None:
    tools = await admin_ops.list_tools(seeded.gateway.kv, TENANT)
    assert [t.name for t in tools] == ["echo", "list_issues"]
    echo = tools[0]
    assert echo.response_headers == ("x-request-id",)  # normalised to lower case
    assert echo.model_dump(mode="json", exclude_none=True)["url"] == "https://upstream.test/echo"
    assert await admin_ops.remove_tool(seeded.gateway.kv, TENANT, "echo") is True
    assert [t.name for t in await admin_ops.list_tools(seeded.gateway.kv, TENANT)] == [
        "list_issues"
    ]


def _config(**changes: Any) -> dict[str, Any]:
    config = {**ECHO_TOOL, **changes}
    return {k: v for k, v in config.items() if v is not None}


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        (_config(input_schema={"type": "object", "prefixItems": []}), "'prefixItems' is not"),
        (_config(input_schema={"type": "object", "$ref": "https://x.test/s"}), "outside"),
        (_config(input_schema={"type": "string"}), '"type": "object"'),
        (_config(name="recall_memory"), "reserved"),
        (_config(name="has space"), "name"),
        (_config(url="ftp://x.test/"), "http(s)"),
        (_config(url="https://user:pw@x.test/"), "credential"),
        (_config(url="https://{host}.test/"), "placeholders"),
        (_config(url="https://x.test/{id}"), "placeholder {id}"),
        (_config(provider=None), "provider"),
        (_config(auth={"type": "header"}), "needs a 'name'"),
        (_config(auth={"type": "query", "name": "k", "prefix": "x"}), "prefix"),
        (_config(auth={"type": "basic", "name": "k"}), "auth.type"),
        (_config(headers={"Content-Length": "1"}), "sets"),
        (_config(headers={"Authorization": "static"}), "both static and the credential"),
        (_config(headers={"X-A": "a\nb"}), "control characters"),
        (_config(response_headers=["content-encoding"]), "cannot be passed through"),
        (_config(method="GET", input_as="json"), "GET"),
        (_config(timeout_seconds=0), "timeout_seconds"),
        (_config(max_request_bytes=10**9), "max_request_bytes"),
        (_config(surprise=True), "surprise"),
    ],
)
async def test_register_tool_refuses_bad_configs_clearly(
    seeded: Seeded, config: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(admin_ops.AdminError) as caught:
        await admin_ops.register_tool(seeded.gateway.kv, TENANT, config)
    assert fragment in str(caught.value)


async def test_path_placeholders_need_required_scalar_properties(seeded: Seeded) -> None:
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    tool = await admin_ops.register_tool(
        seeded.gateway.kv,
        TENANT,
        _config(name="by_id", url="https://x.test/items/{id}", input_schema=schema),
    )
    assert tool.path_placeholders == ["id"]


def test_wrangler_commands_put_each_write_remotely() -> None:
    issued, writes = admin_ops.plan_issue_api_key("acme", now=1.0, label="ci's key")
    commands = admin_ops.wrangler_put_commands(writes, binding="KV")
    assert len(commands) == 2
    for command, write in zip(commands, writes, strict=True):
        argv = shlex.split(command)
        assert argv[:5] == ["npx", "wrangler", "kv", "key", "put"]
        assert "--remote" in argv and "--binding=KV" in argv
        assert argv[-2:] == [write.key, write.value]
    assert issued.api_key not in "\n".join(commands)
    assert hash_token(issued.api_key) in commands[0]


def test_the_documented_tool_config_and_hand_written_records_are_valid() -> None:
    import json
    import re
    from pathlib import Path

    from gateway.credentials import ApiKeyRecord, TenantRecord

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()
    section = doc[doc.index("### Tool config") :]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block is not None
    assert admin_ops.validate_tool_config(json.loads(block.group(1))).name == "github_list_issues"
    tenant = re.search(r'"gw:tenant:acme" \\\n  \'(.*?)\'', doc)
    assert tenant is not None
    TenantRecord.model_validate_json(tenant.group(1))
    record = (
        '{"tenant":"acme","key_id":"k_0123456789abcdef",'
        '"scopes":["tools","memory"],"status":"revoked"}'
    )
    assert ApiKeyRecord.model_validate_json(record).status == "revoked"
