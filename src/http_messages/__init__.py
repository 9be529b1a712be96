"""Runtime-neutral HTTP messages, below both the edge (`worker`) and the `gateway`.

`HttpRequest` / `HttpResponse` / `Headers` are what every handler takes and returns; the
Worker entry converts `workers.Request` into them and the local runtime converts its ASGI
scope, so everything between is plain Python. `ApiError` is the one error type both raise
(`http_messages.errors`). Imports nothing of this project.
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
