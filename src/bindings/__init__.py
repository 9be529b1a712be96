"""The bindings layer: ports (Protocols) the core talks through, and their adapters.

`bindings.ports.*` are pure Python and safe to import anywhere. `bindings.cloudflare.*`
is the only code that speaks to JavaScript objects (FFI); the local adapters live in the
`local_runtime` package, which is never shipped to Cloudflare.
"""
