"""Errors adapters raise for a broken Cloudflare limit or rule; the edge maps them to JSON."""

from __future__ import annotations


class BindingError(Exception):
    """Base class for errors raised by any binding adapter."""


class BindingLimitError(BindingError, ValueError):
    """A documented limit was exceeded (key size, TTL minimum, bound parameters, topK...)."""


class BindingUnavailableError(BindingError):
    """The underlying store or service could not be reached; the call may be retried."""
