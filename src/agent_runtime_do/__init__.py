"""The AgentRuntime Durable Object's logic, in plain Python.

`worker.entry.AgentRuntime` (the `workers.DurableObject` subclass Cloudflare instantiates)
and the local runtime's Durable Object namespace both wrap `AgentRuntimeCore`.
"""
