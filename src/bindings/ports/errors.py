"""Errors adapters raise when a documented Cloudflare limit or rule is broken (rather than
silently differing from Cloudflare); the edge maps them to JSON errors with stable codes."""

from __future__ import annotations


class BindingError(Exception):
    """Base class for errors raised by any binding adapter."""


class BindingLimitError(BindingError, ValueError):
    """A documented limit was exceeded (key size, TTL minimum, bound parameters, topK...)."""


class BindingUnavailableError(BindingError):
    """The underlying store or service could not be reached; the call may be retried."""
