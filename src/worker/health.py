"""GET /healthz: which bindings this deployment has, and the embedding config."""

from __future__ import annotations

import dataclasses

from bindings.environment import Bindings
from http_messages import HttpRequest, HttpResponse, json_response


async def healthz(request: HttpRequest, params: dict[str, str], bindings: Bindings) -> HttpResponse:
    embedding = dataclasses.asdict(bindings.embedder.config) if bindings.embedder else None
    return json_response(
        {
            "status": "ok",
            "environment": bindings.settings.environment,
            "bindings": bindings.present(),
            "embedding": embedding,
        }
    )
