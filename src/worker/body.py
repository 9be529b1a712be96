"""Request body parsing: JSON → pydantic model, or a stable JSON error.

Every body is validated before anything touches storage (DESIGN invariant 7).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from http_messages import HttpRequest
from worker.errors import invalid_json, validation_error

M = TypeVar("M", bound=BaseModel)


def read_json(request: HttpRequest) -> Any:
    """Decode the body as JSON; an empty body is an error too."""
    if not request.body:
        raise invalid_json("request body is empty; expected JSON")
    try:
        return json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise invalid_json(f"request body is not valid JSON: {exc}") from None


def parse_body(request: HttpRequest, model: type[M]) -> M:
    """Decode and validate the body as `model`; errors list each failing field."""
    return parse_model(read_json(request), model)


def parse_model(data: Any, model: type[M]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(body)", "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise validation_error("request body failed validation", {"problems": problems}) from None
