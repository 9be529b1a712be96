"""Delete what a smoke run wrote: memory keys with the memory token; with Access, the
fact, the run's marker erased as a subject, and the memory token the run minted."""

from __future__ import annotations

from urllib.parse import quote

from local_runtime.commands.smoke.memory_checks import memory_call
from local_runtime.commands.smoke.session import (
    Problem,
    Session,
    Skip,
    describe_access_refusal,
    describe_response,
    json_of,
)


def cleanup(s: Session) -> str:
    done: list[str] = []
    left: list[str] = []
    if s.memory_token and not s.memory_refused:
        for tier, key in s.written_keys:
            try:
                response, data = memory_call(
                    s, "DELETE", f"/{quote(key, safe='')}", params={"tier": tier}
                )
            except Problem as exc:
                left.append(f"{tier} key {key} ({exc})")
                continue
            if response.status_code == 200 and isinstance(data, dict):
                done.append(f"{tier} key")
            else:
                left.append(f"{tier} key {key} ({describe_response(response)})")
    elif s.written_keys:
        left.extend(f"{tier} key {key}" for tier, key in s.written_keys)
    for tenant, fact_id in s.written_facts:
        response = s.request("DELETE", f"/admin/tenants/{quote(tenant, safe='')}/facts/{fact_id}")
        data = json_of(response)
        if response.status_code == 200 and isinstance(data, dict) and data.get("complete"):
            done.append(f"fact {fact_id}")
        else:
            left.append(f"fact {fact_id} ({describe_access_refusal(response)})")
    if s.creds.has_access and not s.access_refused:
        for tenant in sorted(s.erase_tenants):
            path = f"/admin/tenants/{quote(tenant, safe='')}/subjects/{quote(s.marker, safe='')}"
            response = s.request("DELETE", path)
            data = json_of(response)
            if response.status_code == 200 and isinstance(data, dict):
                counts = {
                    k: data[k]
                    for k in ("runs", "episodes", "working_keys", "facts", "events")
                    if data.get(k)
                }
                shown = ", ".join(f"{k} {v}" for k, v in counts.items()) or "nothing left"
                done.append(f"erased marker in tenant {tenant} ({shown})")
            else:
                left.append(f"the marker in tenant {tenant} ({describe_access_refusal(response)})")
    elif s.erase_tenants:
        left.append(
            "the agent run's records (the Access credential was refused, so the marker "
            f"could not be erased: DELETE /admin/tenants/T/subjects/{s.marker})"
        )
    if s.minted_jti:
        tenant = str(s.claims.get("tenant") or s.agent_tenant)
        response = s.request(
            "DELETE", f"/admin/tenants/{quote(tenant, safe='')}/memory-tokens/{s.minted_jti}"
        )
        if response.status_code == 200:
            done.append("revoked the minted memory token")
        else:
            left.append(f"the minted memory token ({describe_access_refusal(response)})")
    if left:
        raise Problem(f"left behind: {'; '.join(left)}")
    if not done:
        raise Skip("nothing was written")
    return "deleted " + ", ".join(done)
