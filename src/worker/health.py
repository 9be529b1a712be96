"""GET /healthz: which bindings this deployment has, and the embedding config."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel

from worker.router import Call


class Health(BaseModel):
    status: Literal["ok"]
    environment: str
    bindings: dict[str, bool]
    embedding: dict[str, Any] | None


async def healthz(call: Call[None, None]) -> Health:
    bindings = call.bindings
    embedding = dataclasses.asdict(bindings.embedder.config) if bindings.embedder else None
    return Health(
        status="ok",
        environment=bindings.settings.environment,
        bindings=bindings.present(),
        embedding=embedding,
    )
