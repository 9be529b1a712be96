"""The local state folder: where every local binding keeps its data.

Layout (created on first use):
    kv.sqlite            Workers KV
    d1.sqlite            the primary D1 database (migrations recorded in d1_migrations)
    d1-{shard}.sqlite    every other shard's D1 database (MEMORY_SHARDS)
    durable_objects/     one SQLite file per Durable Object id
    alarms.sqlite        every Durable Object's alarm (set, retry count)
    queues.sqlite        every Queue's messages (the change feed and its dead-letter queue)
    vectors.sqlite       the primary Vectorize index; vectors-{shard}.sqlite the others'
    cold/                the R2 cold tier (archives)
    access/              the dev Cloudflare Access key pair and JWKS
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_STATE_DIR = Path(".state")


@dataclass(frozen=True)
class StateDir:
    root: Path

    @classmethod
    def create(cls, root: Path | str) -> StateDir:
        path = Path(root).resolve()
        for sub in ("durable_objects", "cold", "access"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        return cls(path)

    @property
    def kv(self) -> Path:
        return self.root / "kv.sqlite"

    @property
    def d1(self) -> Path:
        return self.root / "d1.sqlite"

    def d1_of(self, shard: str) -> Path:
        """Shard `shard`'s D1 database: `d1.sqlite` for the primary, `d1-{shard}.sqlite`."""
        return self.d1 if shard == "primary" else self.root / f"d1-{shard}.sqlite"

    def vectors_of(self, shard: str) -> Path:
        return self.root / ("vectors.sqlite" if shard == "primary" else f"vectors-{shard}.sqlite")

    @property
    def durable_objects(self) -> Path:
        return self.root / "durable_objects"

    @property
    def alarms(self) -> Path:
        return self.root / "alarms.sqlite"

    @property
    def queues(self) -> Path:
        return self.root / "queues.sqlite"

    @property
    def cold(self) -> Path:
        return self.root / "cold"

    @property
    def access(self) -> Path:
        return self.root / "access"
