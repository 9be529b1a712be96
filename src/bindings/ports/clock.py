"""Clock port: the only source of time for the core (tests pin it)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (UTC)."""


class SystemClock:
    def now(self) -> float:
        return time.time()


class FixedClock:
    """A clock tests move by hand."""

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
