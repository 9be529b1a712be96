"""The tool gateway: a KV-only hot path for tool calls, and MCP over Streamable HTTP.

Hot-path modules (checked by `tests/gateway/test_hot_path_isolation.py` over the import
graph): `tool_proxy`, `mcp`, `api_keys`, `tool_config`, `credentials`, `tenants`,
`json_schema`, `kv_cache`, `kv_layout`, `errors`, `memory_tools`. They receive a
`bindings.ports.kv.KVNamespace`, a clock and an httpx client factory — never the whole
`Bindings` — so nothing they import can reach D1, Durable Objects, Vectorize or R2.
`gateway.routes` is the small adapter from `Bindings` to those arguments; `gateway.admin_ops`
holds the operator operations (create tenant, issue/revoke keys, credentials, tool configs).
"""
