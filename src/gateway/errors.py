"""Errors the gateway itself returns, distinguishable from anything an upstream says.

Every gateway error is `{"error": {"code", "message"[, "details"]}}` with the header
`x-gateway-error: <code>`; a relayed upstream response never has that header and always
has `x-upstream-status`. Codes are stable; clients may branch on them.
"""

from __future__ import annotations

from typing import Any

from http_messages import HttpResponse, json_response

GATEWAY_ERROR_HEADER = "x-gateway-error"
UPSTREAM_STATUS_HEADER = "x-upstream-status"


class GatewayError(Exception):
    """A failure of the gateway (auth, config, input, upstream transport), never the upstream's."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}

    def to_response(self) -> HttpResponse:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        headers = {GATEWAY_ERROR_HEADER: self.code, **self.headers}
        return json_response({"error": error}, status=self.status, headers=headers)


# RFC 6750 §3: a 401 for a bearer-protected resource names the scheme; no OAuth metadata is
# offered because the gateway uses operator-issued API keys, not an authorization server.
_BEARER_CHALLENGE = 'Bearer realm="agent-memory-gateway"'


def unauthorized(code: str, message: str) -> GatewayError:
    challenge = _BEARER_CHALLENGE
    if code != "missing_api_key":
        challenge += ', error="invalid_token"'
    return GatewayError(401, code, message, headers={"www-authenticate": challenge})


def forbidden(code: str, message: str) -> GatewayError:
    return GatewayError(403, code, message)
