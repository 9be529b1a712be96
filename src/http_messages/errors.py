"""`ApiError`, the one error type every layer that answers HTTP raises (`http_messages`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from http_messages import HttpResponse, json_response


class ApiError(Exception):
    """An error the client caused or should see, with an HTTP status and a stable code."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers: dict[str, str] = dict(headers or {})

    def to_response(self, headers: Mapping[str, str] | None = None) -> HttpResponse:
        """The JSON error response, with this error's headers and `headers` added."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return json_response(
            {"error": error}, status=self.status, headers={**(headers or {}), **self.headers}
        )
