"""The AgentRuntime Durable Object's logic in plain Python (`core.AgentRuntimeCore`),
wrapped by `worker.entry.AgentRuntime` and the local runtime's Durable Object namespace."""
