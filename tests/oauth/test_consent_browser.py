"""The consent page in Debian's Chromium, as a person meets it: signed in through Access
(the `CF_Authorization` cookie Access sets), they see the client's name and host, choose a
tenant among their grants, untick a scope, allow, and land on the client's callback with a
code that yields exactly what they chose."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from authorization.operator_grants import grant
from gateway import admin_ops
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server, serving_in_thread
from tests.inspector.browser import chromium_driver, wait_for
from tests.oauth.conftest import pkce_pair

pytestmark = pytest.mark.xdist_group("chromium")

Message = MutableMapping[str, Any]


async def callback_app(
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    """The client's redirect target: says it received the answer."""
    if scope["type"] != "http":
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        }
    )
    await send({"type": "http.response.body", "body": b"callback received"})


@pytest.fixture
async def consent_runtime(runtime: LocalRuntime) -> AsyncIterator[LocalRuntime]:
    for tenant in ("acme", "globex", "initech"):
        await admin_ops.create_tenant(runtime.kv, runtime.clock, tenant, memory_enabled=True)
    bindings = runtime.bindings()
    for tenant in ("acme", "globex"):
        await grant(bindings, tenant, "email", "dev@example.com", "test")
    yield runtime


def test_a_person_chooses_tenant_and_scopes_in_chromium(
    consent_runtime: LocalRuntime, tmp_path: Path
) -> None:
    runtime = consent_runtime
    driver = chromium_driver(900, 900)
    try:
        with serving_in_thread(callback_app) as callback_base, running_server(runtime) as base:
            redirect_uri = f"{callback_base}/callback"
            registered = httpx.post(
                f"{base}/register",
                json={
                    "client_name": "Cursor",
                    "redirect_uris": [redirect_uri],
                    "token_endpoint_auth_method": "none",
                },
            ).json()
            verifier, challenge = pkce_pair()
            query = {
                "response_type": "code",
                "client_id": registered["client_id"],
                "redirect_uri": redirect_uri,
                "state": "browser-state",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "scope": "tools memory:read memory:write",
                "resource": f"{base}/mcp",
            }
            token = mint_token(runtime.state.access, "dev@example.com", now=time.time())
            driver.get(f"{base}/healthz")
            driver.add_cookie({"name": "CF_Authorization", "value": token, "path": "/"})
            driver.get(f"{base}/authorize?{urlencode(query)}")

            heading = wait_for(driver, lambda d: d.find_element(By.ID, "client-name"))
            assert heading.text == "Cursor"
            assert driver.find_element(By.ID, "redirect-host").text == "127.0.0.1"
            assert driver.find_element(By.ID, "principal").text == "dev@example.com"
            tenant = Select(driver.find_element(By.ID, "tenant"))
            assert [o.text for o in tenant.options] == ["acme", "globex"]  # not initech
            tenant.select_by_visible_text("globex")
            boxes = driver.find_elements(By.CSS_SELECTOR, "#scopes input[type=checkbox]")
            assert [b.get_attribute("name") for b in boxes] == [
                "scope.tools",
                "scope.memory:read",
                "scope.memory:write",
            ]
            driver.find_element(By.NAME, "scope.memory:write").click()
            driver.save_screenshot(str(tmp_path / "consent.png"))
            driver.find_element(By.ID, "approve").click()

            wait_for(driver, lambda d: d.current_url.startswith(redirect_uri))
            assert "callback received" in driver.find_element(By.TAG_NAME, "body").text
            answer = {k: v[0] for k, v in parse_qs(urlsplit(driver.current_url).query).items()}
            assert answer["state"] == "browser-state"
            assert answer["iss"] == base
            tokens = httpx.post(
                f"{base}/token",
                data={
                    "grant_type": "authorization_code",
                    "code": answer["code"],
                    "redirect_uri": redirect_uri,
                    "client_id": registered["client_id"],
                    "code_verifier": verifier,
                    "resource": f"{base}/mcp",
                },
            ).json()
            assert tokens["scope"] == "tools memory:read"
            operator = mint_token(runtime.state.access, "ops@example.com", now=time.time())
            connected = httpx.get(
                f"{base}/admin/tenants/globex/oauth-clients",
                headers={"Cf-Access-Jwt-Assertion": operator},
            ).json()["clients"]
            assert [(c["client_name"], c["principal"]) for c in connected] == [
                ("Cursor", "dev@example.com")
            ]
    finally:
        driver.quit()
