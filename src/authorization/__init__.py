"""Who may act on a tenant, as stored in D1: operators' tenant grants (`operator_grants`) and
the OAuth authorization server's clients, consents, codes, grants and tokens (`oauth_store`).

Each module owns every SQL statement on its tables; the edge (`worker.access`,
`worker.oauth`) calls them. Below the edge beside the memory core: imports only `bindings`
and `http_messages`.
"""
