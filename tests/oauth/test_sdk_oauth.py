"""The official MCP Python SDK's OAuth client against the local dev server, per MCP revision.

What runs: tests/mcp_sdk/client.py's `oauth` scenario in the SDK's own environment
(`mcp==2.3.0`), given only the server's URL and an Access token for its consent "browser".
The SDK discovers the protected-resource and authorization-server metadata from our 401,
registers (DCR) or presents a client metadata document URL (CIMD), runs PKCE, exchanges
the code, lists tools, stores and recalls a memory, refreshes (rotation), and the test
then revokes the refresh token and checks the access token is refused.

For CIMD the client's document is served over HTTPS by a loopback server with a
certificate made here, which the runtime's outbound transport trusts; the Worker fetches it
through the outbound guard (the local runtime allows loopback). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway import admin_ops
from local_runtime.access_dev import DevAccessTransport, mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.gateway.test_mcp_sdk_client import run_sdk_client


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


# What Claude Code's own document lists (issue 42.1): loopback redirects without a port, while
# the client listens on one chosen at run time (RFC 8252 §7.3).
PORTLESS_LOOPBACK = ["http://127.0.0.1/callback", "http://localhost/callback"]


@contextlib.contextmanager
def serving_document(
    directory: Path, name: str = "MCP SDK test client (CIMD)"
) -> Iterator[tuple[str, Path]]:
    """An HTTPS loopback server for one client metadata document listing `PORTLESS_LOOPBACK`;
    yields (its URL, the cert)."""
    cert, key = _certificate(directory)
    documents: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = documents.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body or b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    url = f"https://localhost:{server.server_address[1]}/oauth/client.json"
    documents["/oauth/client.json"] = json.dumps(
        {
            "client_id": url,
            "client_name": name,
            "redirect_uris": PORTLESS_LOOPBACK,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    ).encode()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url, cert
    finally:
        server.shutdown()
        server.server_close()


async def _run(runtime: LocalRuntime, mode: str, metadata_url: str = "") -> dict[str, Any]:
    await admin_ops.create_tenant(runtime.kv, runtime.clock, "acme", memory_enabled=True)
    access = mint_token(runtime.state.access, "ops@example.com", now=time.time())
    with running_server(runtime) as base_url:
        args = ["oauth", base_url, access, mode] + ([metadata_url] if metadata_url else [])
        return await asyncio.to_thread(run_sdk_client, *args)


def _check_flow(seen: dict[str, Any], version: str) -> None:
    assert seen["protocol_version"] == version
    assert seen["redirect"]["iss"].startswith("http://127.0.0.1:")  # RFC 9207, checked by the SDK
    assert seen["consent_shows"] == ["MCP SDK test client", "127.0.0.1", "memory:write"]
    assert seen["scope"] == "tools memory:read memory:write"
    assert seen["tools"] == ["recall_memory", "store_memory"]
    assert seen["store"]["is_error"] is False, seen["store"]
    assert seen["recall"]["is_error"] is False, seen["recall"]
    assert "deploy password rotates every Monday" in seen["recall"]["text"]
    assert seen["refreshed"] is True
    assert seen["tools_after_refresh"] == ["recall_memory", "store_memory"]
    assert seen["authorizations"] == 1  # the refresh needed no second consent
    assert seen["revoke_status"] == 200
    assert seen["revoked_access_token_status"] == 401


@pytest.mark.parametrize(
    ("mode", "version"),
    [("2025-06-18", "2025-06-18"), ("legacy", "2025-11-25"), ("auto", "2026-07-28")],
)
async def test_sdk_oauth_with_dynamic_registration(
    runtime: LocalRuntime, mode: str, version: str
) -> None:
    seen = await _run(runtime, mode)
    _check_flow(seen, version)
    assert seen["client_id"].startswith("amcl_")
    # The SDK registers without naming an auth method: RFC 7591's default, a client secret.
    assert seen["client_secret_issued"] is True


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_sdk_oauth_with_a_client_metadata_document(
    runtime: LocalRuntime, tmp_path: Path, mode: str, version: str
) -> None:
    with serving_document(tmp_path) as (url, cert):
        context = ssl.create_default_context(cafile=str(cert))
        runtime.http_transport = DevAccessTransport(
            runtime.state.access, fallback=httpx.AsyncHTTPTransport(verify=context)
        )
        seen = await _run(runtime, mode, url)
    seen["consent_shows"] = [t.replace(" (CIMD)", "") for t in seen["consent_shows"]]
    _check_flow(seen, version)
    assert seen["client_id"] == url
    assert seen["client_secret_issued"] is False
