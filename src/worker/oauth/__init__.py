"""The Worker's OAuth 2.1 authorization server for MCP clients (docs/gateway.md "OAuth"). D1 rows
are `authorization.oauth_store`'s; using a token is `gateway.credentials`, KV only.
"""
