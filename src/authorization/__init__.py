"""Who may act on a tenant, as stored in D1: operators' tenant grants and the OAuth server's
rows. Each module owns every SQL statement on its tables; imports only `bindings` and
`http_messages`.
"""
