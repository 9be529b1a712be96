"""Finding 6 of issue 14 on the hot path: a tool call logs neither the tenant's
credential (even when it travels in the query string) nor the arguments."""

from __future__ import annotations

import logging

import pytest

from tests.gateway.conftest import Seeded


async def test_a_tool_call_logs_no_credential_and_no_arguments(
    seeded: Seeded, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gw = seeded.gateway
    secret_arg = "owner-secret-9931"
    response = await gw.call_tool("list_issues", {"owner": secret_arg, "repo": "r"}, key=seeded.key)
    assert response.status == 200
    assert gw.upstream.last.url.params["access_token"] == "s3cret-forge"
    text = "\n".join(logging.Formatter("%(message)s").format(r) for r in caplog.records)
    for secret in ("s3cret-forge", secret_arg, seeded.key):
        assert secret not in text
