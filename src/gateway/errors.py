"""The gateway's errors: the shared `ApiError` answered with `x-gateway-error: <code>` and
`{"error": {"code", "message"[, "details"]}}`; a relayed upstream answer never has that header
and always has `x-upstream-status`.
"""

from __future__ import annotations

from http_messages import ApiError, HttpResponse

GATEWAY_ERROR_HEADER = "x-gateway-error"
UPSTREAM_STATUS_HEADER = "x-upstream-status"


def gateway_error_response(exc: ApiError) -> HttpResponse:
    """The gateway's answer for `exc`: its JSON error with `x-gateway-error`."""
    return exc.to_response({GATEWAY_ERROR_HEADER: exc.code})


def unauthorized(code: str, message: str) -> ApiError:
    """A 401 with RFC 6750's challenge (`oauth_tokens` adds RFC 9728's metadata)."""
    challenge = 'Bearer realm="agent-memory-gateway"'
    if code != "missing_api_key":
        challenge += ', error="invalid_token"'
    return ApiError(401, code, message, headers={"www-authenticate": challenge})


def forbidden(code: str, message: str) -> ApiError:
    return ApiError(403, code, message)
