"""Credentials of a smoke run: where each comes from, the headers it becomes, and keeping
every value out of what is printed."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jwt

# Header names, as Cloudflare Access and the Worker (`worker.identity`) spell them.
ACCESS_JWT_HEADER = "Cf-Access-Jwt-Assertion"
ACCESS_EDGE_TOKEN_HEADER = "cf-access-token"
ACCESS_CLIENT_ID_HEADER = "CF-Access-Client-Id"
ACCESS_CLIENT_SECRET_HEADER = "CF-Access-Client-Secret"

# (attribute, flag, environment variable, what it is)
CREDENTIALS = (
    ("memory_token", "--memory-token", "AGENT_MEMORY_MEMORY_TOKEN", "memory token"),
    ("access_token", "--access-token", "AGENT_MEMORY_TOKEN", "Access token"),
    ("client_id", "--access-client-id", "CF_ACCESS_CLIENT_ID", "Access service token id"),
    (
        "client_secret",
        "--access-client-secret",
        "CF_ACCESS_CLIENT_SECRET",
        "Access service token secret",
    ),
    ("api_key", "--api-key", "AGENT_MEMORY_API_KEY", "API key"),
)


@dataclass
class Credentials:
    memory_token: str | None = None
    access_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    api_key: str | None = None
    # attribute -> where it came from ("--flag" or "$VAR"), for the header line
    sources: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: dict[str, str]) -> Credentials:
        creds = cls()
        for attr, flag, env, _ in CREDENTIALS:
            value = getattr(args, attr, None)
            source = flag
            if not value:
                value, source = environ.get(env) or None, f"${env}"
            if value:
                setattr(creds, attr, value.strip())
                creds.sources[attr] = source
        return creds

    @property
    def has_service_token(self) -> bool:
        return bool(self.client_id and self.client_secret)

    @property
    def has_access(self) -> bool:
        return bool(self.access_token) or self.has_service_token

    def access_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        if self.has_service_token:
            assert self.client_id is not None and self.client_secret is not None
            headers[ACCESS_CLIENT_ID_HEADER] = self.client_id
            headers[ACCESS_CLIENT_SECRET_HEADER] = self.client_secret
        if self.access_token:
            headers[ACCESS_EDGE_TOKEN_HEADER] = self.access_token
            headers[ACCESS_JWT_HEADER] = self.access_token
        return headers

    def secrets(self) -> list[str]:
        values = [self.memory_token, self.access_token, self.client_secret, self.api_key]
        return [v for v in values if v]

    def describe(self) -> str:
        names = {attr: what for attr, _, _, what in CREDENTIALS}
        given = [f"{names[a]} ({s})" for a, s in self.sources.items()]
        return ", ".join(given) if given else "none"


def unverified_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, NOT verified (the Worker verifies it): which tenant, agent and
    tiers a memory token is for, so the checks address the right paths. {} if unreadable."""
    try:
        return jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}


def redact(text: str, hidden: Iterable[str]) -> str:
    """`text` with every credential value replaced: output never shows a secret, even if a
    server echoed one."""
    for value in sorted(hidden, key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, "[redacted]")
    return text
