"""The tool gateway: a KV-only hot path for tool calls, and MCP over Streamable HTTP. Only
`routes` sees `Bindings`; nothing here imports D1, Durable Object, Vectorize, R2 or memory
core code (tests/gateway/test_hot_path_isolation.py). `admin_ops`: operators' operations.
"""
