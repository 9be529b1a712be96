"""The Worker's OAuth 2.1 authorization server, for MCP clients (claude.ai, ChatGPT, Cursor,
Codex, Claude Code) that connect with only a URL (docs/gateway.md "OAuth").

`metadata` (RFC 8414 and RFC 9728 documents), `authorize` (`/authorize` behind Cloudflare
Access, with the consent page), `token_endpoint` (`/token`, `/revoke`, `/register`),
`clients` (DCR and CIMD), `protocol` (errors, PKCE, scopes, secrets, issuing and revoking
tokens), `connected` (an operator's list / revoke of a tenant's connected clients). The D1
rows are `authorization.oauth_store`'s; using a token is `gateway.credentials`, KV only.
"""
