"""Path parameters shared by the admin routes, validated before anything runs."""

from __future__ import annotations

from agent_memory.scope import is_tenant
from worker.errors import ApiError


def tenant_param(params: dict[str, str]) -> str:
    """The `{tenant}` path segment, or a 422 `invalid_path` error."""
    tenant = params["tenant"]
    if not is_tenant(tenant):
        raise ApiError(
            422,
            "invalid_path",
            "tenant must be 1-63 characters of a-z, 0-9, '_' or '-', starting with a letter "
            "or digit",
        )
    return tenant
