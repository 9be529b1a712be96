"""The gateway's errors, distinguishable from anything an upstream says.

The gateway raises the shared `ApiError` (`http_messages.errors`); when it answers, it adds
the header `x-gateway-error: <code>` (`gateway_error_response`), so every gateway error is
`{"error": {"code", "message"[, "details"]}}` with that header, while a relayed upstream
response never has it and always has `x-upstream-status`. Codes are stable; clients may
branch on them.
"""

from __future__ import annotations

from http_messages import HttpResponse
from http_messages.errors import ApiError

GATEWAY_ERROR_HEADER = "x-gateway-error"
UPSTREAM_STATUS_HEADER = "x-upstream-status"


def gateway_error_response(exc: ApiError) -> HttpResponse:
    """The gateway's answer for `exc`: its JSON error with `x-gateway-error`."""
    return exc.to_response({GATEWAY_ERROR_HEADER: exc.code})


# RFC 6750 §3: a 401 for a bearer-protected resource names the scheme; no OAuth metadata is
# offered because the gateway uses operator-issued API keys, not an authorization server.
_BEARER_CHALLENGE = 'Bearer realm="agent-memory-gateway"'


def unauthorized(code: str, message: str) -> ApiError:
    challenge = _BEARER_CHALLENGE
    if code != "missing_api_key":
        challenge += ', error="invalid_token"'
    return ApiError(401, code, message, headers={"www-authenticate": challenge})


def forbidden(code: str, message: str) -> ApiError:
    return ApiError(403, code, message)
