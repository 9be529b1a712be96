"""The tool gateway: a KV-only hot path for tool calls, and MCP over Streamable HTTP.

Hot-path modules (`tool_proxy`, `mcp`, `api_keys`, `oauth_tokens`, `tool_config`,
`json_schema`, `kv_cache`, `outbound`, `errors`) are handed KV, a clock and an httpx client
factory — never `Bindings` — and import nothing that reaches D1, Durable Objects, Vectorize,
R2 or the memory core (tests/gateway/test_hot_path_isolation.py walks the import graph).
`routes` adapts `Bindings` to them; `admin_ops` holds the operators' operations.
"""
