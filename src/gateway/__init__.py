"""The tool gateway: a KV-only hot path for tool calls and MCP. Only `routes` sees `Bindings`;
nothing here reaches D1, Durable Objects, Vectorize, R2 or the memory core."""
