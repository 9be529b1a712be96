"""Findings 4 and 5 of issue 14: tool URL templates cannot leave their path, and the
gateway never calls loopback, private, link-local, CGNAT or metadata hosts unless the
operator's allow-list names them.

No test here sends traffic anywhere: the upstream is an `httpx.MockTransport` that
records requests, and "refused" means it recorded none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from bindings.environment import Bindings
from bindings.settings import Settings
from gateway import admin_ops
from tests.gateway.conftest import TENANT, Seeded, gateway_error


@pytest.mark.parametrize(
    ("owner", "repo"),
    [
        ("..", "x"),
        ("x", ".."),
        (".", "x"),
        ("%2e%2e", "x"),
        ("%2E.", "x"),
        ("%252e%252e", "x"),
        ("", "x"),
    ],
)
async def test_dot_segments_in_url_arguments_are_refused_before_any_call(
    seeded: Seeded, owner: str, repo: str
) -> None:
    gw = seeded.gateway
    response = await gw.call_tool("list_issues", {"owner": owner, "repo": repo}, key=seeded.key)
    assert gateway_error(response) == (422, "invalid_tool_input")
    assert gw.upstream.requests == []


async def test_dots_inside_a_segment_are_still_plain_values(seeded: Seeded) -> None:
    gw = seeded.gateway
    response = await gw.call_tool("list_issues", {"owner": "a..b", "repo": "...x"}, key=seeded.key)
    assert response.status == 200
    assert gw.upstream.last.url.path == "/repos/a..b/...x/issues"


async def test_a_placeholder_next_to_a_dot_cannot_make_a_dot_segment(seeded: Seeded) -> None:
    gw = seeded.gateway
    tool = {
        "name": "by_ext",
        "url": "https://upstream.test/files/{name}./raw",
        "method": "GET",
        "input_schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    }
    await admin_ops.register_tool(gw.kv, TENANT, tool)
    response = await gw.call_tool("by_ext", {"name": "."}, key=seeded.key)
    assert gateway_error(response) == (422, "invalid_tool_input")
    assert gw.upstream.requests == []


@pytest.mark.parametrize(
    "path", ["/a/../b", "/a/./b", "/a/%2e%2e/b", "/a/%2E/b", "/a/%252e%252e/b"]
)
async def test_url_templates_with_dot_segments_are_not_registered(
    seeded: Seeded, path: str
) -> None:
    with pytest.raises(admin_ops.AdminError):
        await admin_ops.register_tool(
            seeded.gateway.kv, TENANT, {"name": "climb", "url": f"https://upstream.test{path}"}
        )


FORBIDDEN_URLS = [
    "http://127.0.0.1:9/x",
    "http://127.1/x",
    "http://2130706433/x",  # decimal 127.0.0.1
    "http://0x7f000001/x",  # hex
    "http://0x7f.0.0.1/x",
    "http://0177.0.0.1/x",  # octal
    "http://017700000001/x",
    "http://[::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://[::ffff:a9fe:a9fe]/x",  # 169.254.169.254 mapped into IPv6
    "http://0.0.0.0/x",
    "http://10.0.0.5/x",
    "http://172.16.3.4/x",
    "http://192.168.1.1/x",
    "http://100.64.0.1/x",  # CGNAT
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fe80::1]/x",
    "http://localhost:8080/admin",
    "http://LOCALHOST./x",
    "http://api.localhost/x",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata/x",
    # What Cloudflare's fetch (a WHATWG URL parser) decodes to loopback (issue 47).
    "http://%31%32%37.0.0.1/x",
    "http://%6c%6fcalhost/x",
    "http://\uff11\uff12\uff17.0.0.1/x",  # full-width digits
    "http://127\u30020\u30020\u30021/x",  # ideographic full stops
]


async def _register(seeded: Seeded, url: str, name: str = "inner") -> None:
    await admin_ops.register_tool(seeded.gateway.kv, TENANT, {"name": name, "url": url})


@pytest.mark.parametrize("url", FORBIDDEN_URLS)
async def test_non_public_upstreams_are_refused_without_a_connection(
    seeded: Seeded, url: str
) -> None:
    gw = seeded.gateway
    await _register(seeded, url)
    response = await gw.call_tool("inner", {}, key=seeded.key)
    assert gateway_error(response) == (403, "upstream_forbidden")
    assert "OUTBOUND_ALLOWED_HOSTS" in response.json()["error"]["message"]
    assert gw.upstream.requests == []


async def test_mcp_reports_a_refused_upstream_as_a_tool_error(seeded: Seeded) -> None:
    gw = seeded.gateway
    await _register(seeded, "http://169.254.169.254/latest/meta-data/")
    response = await gw.rpc("tools/call", {"name": "inner", "arguments": {}}, key=seeded.key)
    result = response.json()["result"]
    assert result["isError"] is True
    assert "upstream_forbidden" in result["content"][0]["text"]
    assert gw.upstream.requests == []


def _with_resolver(seeded: Seeded, answers: dict[str, Sequence[str]]) -> list[str]:
    """Give the deployment a fake resolver (no DNS traffic); returns the names it was asked."""
    gw = seeded.gateway
    asked: list[str] = []
    original = gw.bindings

    async def resolve(host: str) -> Sequence[str]:
        asked.append(host)
        return answers[host]

    def bindings() -> Bindings:
        return dataclasses.replace(original(), resolve_host=resolve)

    gw.bindings = bindings  # type: ignore[method-assign]
    return asked


@pytest.mark.parametrize(
    "address", ["10.1.2.3", "127.0.0.1", "169.254.169.254", "::1", "100.100.1.1"]
)
async def test_a_name_resolving_to_private_space_is_refused(seeded: Seeded, address: str) -> None:
    gw = seeded.gateway
    asked = _with_resolver(seeded, {"intranet.example.com": ["93.184.216.34", address]})
    await _register(seeded, "https://intranet.example.com/api")
    response = await gw.call_tool("inner", {}, key=seeded.key)
    assert gateway_error(response) == (403, "upstream_forbidden")
    assert asked == ["intranet.example.com"]
    assert gw.upstream.requests == []


async def test_a_name_resolving_to_public_space_is_called(seeded: Seeded) -> None:
    gw = seeded.gateway
    _with_resolver(seeded, {"api.example.com": ["93.184.216.34", "2606:2800:220:1::1"]})
    await _register(seeded, "https://api.example.com/v1")
    response = await gw.call_tool("inner", {}, key=seeded.key)
    assert response.status == 200
    assert str(gw.upstream.last.url) == "https://api.example.com/v1"


@pytest.mark.parametrize(
    ("allowed", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:9/x"),
        ("127.0.0.0/8", "http://2130706433/x"),
        ("localhost", "http://localhost:8080/x"),
        ("10.0.0.0/8, ::1", "http://[::1]/x"),
        ("metadata.google.internal", "http://metadata.google.internal/x"),
    ],
)
async def test_the_operator_allow_list_lets_named_hosts_through(
    seeded: Seeded, allowed: str, url: str
) -> None:
    gw = seeded.gateway
    gw.settings = Settings(environment="test", outbound_allowed_hosts=allowed)
    await _register(seeded, url)
    response = await gw.call_tool("inner", {}, key=seeded.key)
    assert response.status == 200, response.body
    assert len(gw.upstream.requests) == 1


async def test_the_allow_list_names_only_what_it_names(seeded: Seeded) -> None:
    gw = seeded.gateway
    gw.settings = Settings(environment="test", outbound_allowed_hosts="127.0.0.1")
    await _register(seeded, "http://169.254.169.254/x")
    assert gateway_error(await gw.call_tool("inner", {}, key=seeded.key)) == (
        403,
        "upstream_forbidden",
    )
    assert gw.upstream.requests == []


@pytest.mark.parametrize("bad", ["http://x", "a b", "10.0.0.0/33", "*.example.com"])
def test_a_malformed_allow_list_is_refused_at_startup(bad: str) -> None:
    with pytest.raises(ValueError, match="OUTBOUND_ALLOWED_HOSTS"):
        Settings(outbound_allowed_hosts=bad)
