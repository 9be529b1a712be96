"""Drive the official MCP Python SDK's client against a running server; print what it saw.

    uv run --project tests/mcp_sdk --frozen python tests/mcp_sdk/client.py SCENARIO URL KEY MODE
    ... client.py oauth URL ACCESS_TOKEN MODE [CLIENT_METADATA_URL]

`oauth` runs the SDK's own OAuth provider (`mcp.client.auth.OAuthClientProvider`) from a bare
URL: 401 → protected-resource and authorization-server discovery → DCR (or CIMD when a
client metadata URL is given) → PKCE authorization → token → tools → refresh → revocation.
Its redirect handler plays the browser: it opens the authorization URL with a Cloudflare
Access token (ACCESS_TOKEN, minted by the test), reads the consent page, approves it, and
hands the redirect's `code`, `state` and `iss` to the SDK's callback handler.
MODE `2025-06-18` is the SDK's legacy handshake offering 2025-06-18 (the SDK's own newest
handshake version is 2025-11-25, so the offer is patched); `legacy` offers 2025-11-25;
`auto` probes `server/discover` and speaks 2026-07-28.

Runs in its own environment (tests/mcp_sdk/pyproject.toml), so it imports nothing of the
project. The last line of stdout is one JSON object; tests/gateway/test_mcp_sdk_client.py
asserts on it.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import mcp.client.session
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError


def _client(base_url: str, api_key: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {api_key}"})
    return Client(streamable_http_client(f"{base_url}/mcp", http_client=http), mode=mode)


async def list_and_call(base_url: str, api_key: str, mode: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with _client(base_url, api_key, mode) as client:
        seen["protocol_version"] = client.protocol_version
        seen["server_name"] = client.server_info.name if client.server_info else None
        seen["has_tools_capability"] = client.server_capabilities.tools is not None
        listed = await client.list_tools()
        seen["tools"] = {tool.name: tool.input_schema for tool in listed.tools}
        result = await client.call_tool("echo", {"text": "hello"})
        seen["echo"] = {"is_error": result.is_error, "text": result.content[0].text}
        failed = await client.call_tool("broken", {"text": "x"})
        seen["broken"] = {"is_error": failed.is_error, "text": failed.content[0].text}
        try:
            await client.call_tool("nope", {})
            seen["unknown_tool_error"] = None
        except MCPError as exc:
            seen["unknown_tool_error"] = exc.error.code
    return seen


async def bad_key(base_url: str, api_key: str, mode: str) -> dict[str, Any]:
    try:
        async with _client(base_url, api_key, mode):
            return {"errors": []}
    except BaseException as exc:  # the SDK wraps errors in ExceptionGroups
        errors = [e for e in _flatten(exc) if isinstance(e, MCPError)]
        return {"errors": [{"code": e.error.code, "data": e.error.data} for e in errors]}


def _flatten(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _flatten(sub)]
    return [exc]


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def _callback(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """The client's loopback redirect target: it received the answer."""
    await reader.readline()
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


class ConsentBrowser:
    """The person at the consent page: signed in through Access, approves the first tenant,
    and lands on the client's loopback callback."""

    def __init__(self, access_token: str) -> None:
        self.access_token = access_token
        self.redirect: dict[str, str] = {}
        self.consent_pages: list[str] = []

    async def open(self, authorization_url: str) -> None:
        headers = {"Cf-Access-Jwt-Assertion": self.access_token}
        async with httpx2.AsyncClient(headers=headers) as http:
            page = await http.get(authorization_url)
            page.raise_for_status()
            html = page.text
            self.consent_pages.append(html)
            ticket = unescape(re.search(r"name=ticket value='([^']+)'", html).group(1))
            tenant = re.search(r"<option value='([^']+)'>", html).group(1)
            form = {"ticket": ticket, "tenant": tenant, "decision": "approve"}
            for scope in re.findall(r"name='scope\.([^']+)'", html):
                form[f"scope.{scope}"] = "on"
            base = f"{urlsplit(authorization_url).scheme}://{urlsplit(authorization_url).netloc}"
            answer = await http.post(f"{base}/authorize", data=form)
            assert answer.status_code == 302, answer.text
            location = answer.headers["location"]
            assert (await http.get(location)).status_code == 200
        self.redirect = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}

    async def callback(self) -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=self.redirect["code"],
            state=self.redirect.get("state"),
            iss=self.redirect.get("iss"),
        )


async def _raw_mcp(base_url: str, token: str) -> int:
    """POST tools/list with a bare token (no SDK auth: a 401 must not start a new flow)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-06-18"}
    async with httpx2.AsyncClient() as http:
        return (await http.post(f"{base_url}/mcp", json=body, headers=headers)).status_code


async def oauth(
    base_url: str, access_token: str, mode: str, metadata_url: str = ""
) -> dict[str, Any]:
    if mode == "2025-06-18":
        mcp.client.session.LATEST_HANDSHAKE_VERSION = "2025-06-18"
        mode = "legacy"
    # The callback listens on a port chosen now (a client document lists port-less loopback
    # redirects: RFC 8252 §7.3 lets this one match them).
    callback = await asyncio.start_server(_callback, "127.0.0.1", 0)
    redirect_uri = f"http://127.0.0.1:{callback.sockets[0].getsockname()[1]}/callback"
    browser = ConsentBrowser(access_token)
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=f"{base_url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="MCP SDK test client",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        client_metadata_url=metadata_url or None,
    )
    seen: dict[str, Any] = {}
    http = httpx2.AsyncClient(auth=provider)
    async with Client(
        streamable_http_client(f"{base_url}/mcp", http_client=http), mode=mode
    ) as client:
        seen["protocol_version"] = client.protocol_version
        seen["client_id"] = storage.client_info.client_id if storage.client_info else None
        seen["client_secret_issued"] = bool(
            storage.client_info and storage.client_info.client_secret
        )
        seen["redirect"] = {k: v for k, v in browser.redirect.items() if k != "code"}
        seen["consent_shows"] = [
            text
            for text in ("MCP SDK test client", "127.0.0.1", "memory:write")
            if text in browser.consent_pages[0]
        ]
        first = storage.tokens
        seen["scope"] = first.scope if first else None
        listed = await client.list_tools()
        seen["tools"] = sorted(tool.name for tool in listed.tools)
        stored = await client.call_tool(
            "store_memory", {"content": f"The deploy password rotates every Monday ({mode})"}
        )
        seen["store"] = {"is_error": stored.is_error, "text": stored.content[0].text}
        recalled = await client.call_tool("recall_memory", {"query": "deploy password rotates"})
        seen["recall"] = {"is_error": recalled.is_error, "text": recalled.content[0].text}
        # Make the access token look expired: the provider refreshes before the next call.
        provider.context.token_expiry_time = 1.0  # (0 would read as "no expiry")
        again = await client.list_tools(cache_mode="refresh")  # bypass the SDK's list cache
        second = storage.tokens
        seen["refreshed"] = bool(
            first
            and second
            and second.access_token != first.access_token
            and second.refresh_token != first.refresh_token
        )
        seen["tools_after_refresh"] = sorted(tool.name for tool in again.tools)
        seen["authorizations"] = len(browser.consent_pages)
    assert first is not None and second is not None
    seen["old_access_token_status"] = await _raw_mcp(base_url, first.access_token)
    async with httpx2.AsyncClient() as raw:
        revoke = await raw.post(
            f"{base_url}/revoke",
            data={"token": second.refresh_token, "client_id": storage.client_info.client_id},
            auth=(storage.client_info.client_id, storage.client_info.client_secret)
            if storage.client_info.client_secret
            else None,
        )
    seen["revoke_status"] = revoke.status_code
    seen["revoked_access_token_status"] = await _raw_mcp(base_url, second.access_token)
    callback.close()
    return seen


SCENARIOS = {"list_and_call": list_and_call, "bad_key": bad_key, "oauth": oauth}


def main() -> None:
    scenario, base_url, secret, mode, *rest = sys.argv[1:]
    print(json.dumps(asyncio.run(SCENARIOS[scenario](base_url, secret, mode, *rest))))


if __name__ == "__main__":
    main()
