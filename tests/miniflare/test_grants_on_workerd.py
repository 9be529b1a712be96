"""Operator grants on workerd's D1: an identity in any number of Access groups resolves
with one bound parameter (D1 allows 100 per statement; issue 26)."""

from __future__ import annotations

import pytest

from authorization.operator_grants import Principal, grant, granted, granted_tenants
from bindings.environment import Bindings


@pytest.mark.parametrize("count", [49, 100, 500])
async def test_grants_resolve_for_many_groups_on_workerd_d1(
    mf_bindings: Bindings, count: int
) -> None:
    groups = tuple(f"g{i:03d}" for i in range(count))
    who = Principal(email="gail@example.com", groups=groups)
    assert not await granted(who, "acme", mf_bindings)
    await grant(mf_bindings, "acme", "group", groups[-1], "test")
    await grant(mf_bindings, "globex", "email", "someone@example.com", "test")
    assert await granted(who, "acme", mf_bindings)
    assert not await granted(who, "globex", mf_bindings)
    assert not await granted(who, None, mf_bindings)
    assert await granted_tenants(who, mf_bindings) == {"acme"}
