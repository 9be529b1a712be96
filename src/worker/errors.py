"""The edge's error constructors; every failure the edge returns is an `ApiError`."""

from __future__ import annotations

from typing import Any

from http_messages import ApiError as ApiError


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def method_not_allowed(allowed: list[str]) -> ApiError:
    """405 with the `Allow` header RFC 9110 requires, naming the path's methods."""
    return ApiError(
        405,
        "method_not_allowed",
        f"method not allowed; use {', '.join(allowed)}",
        {"allowed": allowed},
        headers={"allow": ", ".join(allowed)},
    )


def invalid_json(message: str) -> ApiError:
    return ApiError(400, "invalid_json", message)


def payload_too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"request body exceeds {limit} bytes")


def validation_error(message: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(422, "validation_error", message, details)


def internal_error() -> ApiError:
    return ApiError(500, "internal_error", "internal error; the request changed nothing")
