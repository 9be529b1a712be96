"""Ports (Protocols, pure Python) the core talks through, and their Cloudflare adapters
(`bindings.cloudflare`, the only FFI code); local adapters live in `local_runtime`."""
