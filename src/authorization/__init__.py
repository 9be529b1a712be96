"""Who may act on a tenant, as stored in D1 (operators' grants, the OAuth server's rows); each
module owns every statement on its tables and imports only `bindings` and `http_messages`."""
