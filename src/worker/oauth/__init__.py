"""The Worker's OAuth 2.1 authorization server, for MCP clients that connect with only a URL
(docs/gateway.md "OAuth"): `protocol` (errors, PKCE, scopes, secrets, tokens, metadata),
`authorize` (the consent page behind Cloudflare Access), `token_endpoint` (`/token`,
`/revoke`, `/register`), `clients` (DCR and CIMD), `connected` (an operator's list / revoke).
D1 rows are `authorization.oauth_store`'s; using a token is `gateway.credentials`, KV only.
"""
