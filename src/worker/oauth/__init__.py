"""The Worker's OAuth 2.1 authorization server, for MCP clients (claude.ai, ChatGPT, Cursor,
Codex, Claude Code) that connect with only a URL (docs/gateway.md "OAuth").

Modules, outside in: `routes` (the lazy route handlers), `metadata` (RFC 8414 and RFC 9728
documents), `authorize` + `consent_page` (`/authorize` behind Cloudflare Access),
`token_endpoint` (`/token`, `/revoke`, `/register`), `clients` (DCR and CIMD), `store`
(D1 rows and the KV access-token records), `protocol` (errors, PKCE, scopes, secrets),
`connected` (an operator's list / revoke of a tenant's connected clients).

Issuance and refresh use D1 and KV; using a token is `gateway.oauth_tokens`, KV only.
"""
