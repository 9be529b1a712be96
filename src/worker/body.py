"""Request body parsing: JSON → pydantic model, or a stable JSON error.

Every body is validated before anything touches storage (DESIGN invariant 7), by the router
(`worker.router`) with the route's model. Bodies are validated strictly: JSON has types, so
a `0` is not `false`, a `"5"` is not `5` and `1.0` is not an integer (issue 26: `{"dry_run":
0}` ran a real prune). Query strings are text, so their models convert (`strict=False`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from http_messages import HttpRequest
from http_messages.bounded_json import STORAGE_LIMITS, JsonLimitError, JsonLimits, loads_bounded
from worker.errors import ApiError, invalid_json, validation_error

M = TypeVar("M", bound=BaseModel)


def read_json(request: HttpRequest, limits: JsonLimits = STORAGE_LIMITS) -> Any:
    """Decode the body as JSON under `limits` (depth, number and string size, no NUL by
    default: these bodies reach storage); an empty body is an error too.

    Refusals are 400 `invalid_json` for text that is not JSON, 413 `json_too_deep` /
    `number_too_large` / `string_too_long` for a limit, 422 `invalid_character` for NUL.
    """
    if not request.body:
        raise invalid_json("request body is empty; expected JSON")
    try:
        return loads_bounded(request.body, limits)
    except JsonLimitError as exc:
        raise json_limit_error(exc) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise invalid_json(f"request body is not valid JSON: {exc}") from None


def json_limit_error(exc: JsonLimitError) -> ApiError:
    """The API error for a broken JSON limit (one mapping for every route)."""
    if exc.code == "invalid_json":
        return invalid_json(exc.message)
    return ApiError(exc.status, exc.code, exc.message)


def parse_body(request: HttpRequest, model: type[M]) -> M:
    """Decode and validate the body as `model`, strictly; errors list each failing field."""
    return parse_model(read_json(request), model, strict=True)


def parse_model(data: Any, model: type[M], *, strict: bool = False) -> M:
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(body)", "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise validation_error("request body failed validation", {"problems": problems}) from None
