"""One agent turn over a tenant's `Memory`: context assembly, the tool loop and its tools.
The top of the core: only the Durable Object logic and the edge import it."""
