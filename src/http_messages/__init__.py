"""Runtime-neutral HTTP messages, below both the edge (`worker`) and the `gateway`: what
every handler takes and returns, and `ApiError`. Imports nothing of this project.
"""

from http_messages.errors import ApiError
from http_messages.messages import (
    Headers,
    HttpRequest,
    HttpResponse,
    empty_response,
    json_response,
)

__all__ = ["ApiError", "Headers", "HttpRequest", "HttpResponse", "empty_response", "json_response"]
