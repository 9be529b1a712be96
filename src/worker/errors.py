"""API errors: every failure the edge returns is `{"error": {"code", "message"}}`.

Codes are stable identifiers clients may branch on; messages are for people.
"""

from __future__ import annotations

from typing import Any

from http_messages import HttpResponse, json_response


class ApiError(Exception):
    """An error the client caused or should see, with an HTTP status and a stable code."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details

    def to_response(self) -> HttpResponse:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return json_response({"error": error}, status=self.status)


def not_found(message: str = "no such route") -> ApiError:
    return ApiError(404, "not_found", message)


def method_not_allowed(allowed: list[str]) -> ApiError:
    return ApiError(
        405,
        "method_not_allowed",
        f"method not allowed; use {', '.join(allowed)}",
        {"allowed": allowed},
    )


def invalid_json(message: str = "request body is not valid JSON") -> ApiError:
    return ApiError(400, "invalid_json", message)


def payload_too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"request body exceeds {limit} bytes")


def validation_error(message: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(422, "validation_error", message, details)


def internal_error() -> ApiError:
    return ApiError(500, "internal_error", "internal error; the request changed nothing")
