"""`ApiError`'s import path for the modules below the edge (it lives in `http_messages`)."""

from http_messages import ApiError

__all__ = ["ApiError"]
