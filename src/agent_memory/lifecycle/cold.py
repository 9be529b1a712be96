"""The cold tier's archive format: gzip-compressed NDJSON objects per tenant, kind and ISO week.

Layout (docs/lifecycle.md, "Archive layout"):

    archive/{tenant}/episodes/{YYYY}-W{ww}/{first_ms:013d}-{first_id}.ndjson.gz
    logs/{tenant}/{runs|events}/{YYYY}-W{ww}/{first_ms:013d}-{first_id}.ndjson.gz

* `kind` is `episodes` (rows of `memory_episodes`), `runs` (`agent_runs`) or `events`
  (`memory_events`). Runs and events are the placement table's `log` kind, deleted from
  cold after `cold_retention_days` (90): they live under their own root, `logs/`, so one R2
  lifecycle rule on that prefix can expire them (R2 rules match key prefixes only).
  Archives written before that change keep their `archive/{tenant}/{runs|events}/` keys;
  both are parsed, listed, erased and expired alike;
* the ISO week is the one the archived rows *happened* in (`created_at` of an episode or
  event, `started_at` of a run), so an archive object never spans two weeks;
* the name ends with the sort key of the object's first row, so the object a batch writes
  is determined by the rows it archives: a batch that is retried after an interruption
  (archived but not yet deleted) writes the same key again and replaces its own object
  instead of adding a second copy.

Each line is one row as a JSON object, columns as stored, except that JSON columns
(`data`, `input`, `output`, `payload`) are decoded into JSON values so the archive reads naturally.
The bytes are deterministic for the same rows (sorted keys, gzip `mtime=0`), so a retried
batch produces an identical object.
"""

from __future__ import annotations

import datetime
import gzip
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

ArchiveKind = Literal["episodes", "runs", "events"]

ARCHIVE_ROOT = "archive"
LOG_ROOT = "logs"
ARCHIVE_SUFFIX = ".ndjson.gz"
# Columns stored as JSON text, per archived table.
JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "episodes": ("data",),
    "runs": ("input", "output"),
    "events": ("payload",),
}
_MS_PER_DAY = 86_400_000
_MS_PER_WEEK = 7 * _MS_PER_DAY


def iso_week(ms: int) -> str:
    """`2026-W07`: the ISO year and week of an epoch-millisecond time (UTC)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    year, week, _ = moment.isocalendar()
    return f"{year:04d}-W{week:02d}"


def week_bounds(ms: int) -> tuple[int, int]:
    """[start, end) of the ISO week (Monday 00:00 UTC to the next Monday) holding `ms`."""
    # The epoch (1970-01-01) was a Thursday: Monday 1969-12-29 starts its ISO week.
    first_monday = -3 * _MS_PER_DAY
    start = first_monday + ((ms - first_monday) // _MS_PER_WEEK) * _MS_PER_WEEK
    return start, start + _MS_PER_WEEK


def tenant_prefixes(tenant_id: str) -> tuple[str, ...]:
    """Every prefix under which the tenant's archives live (one `list` each)."""
    return (f"{ARCHIVE_ROOT}/{tenant_id}/", f"{LOG_ROOT}/{tenant_id}/")


def archive_key(tenant_id: str, kind: ArchiveKind, first_ms: int, first_id: str) -> str:
    """The object key of the archive whose first row is (`first_ms`, `first_id`)."""
    root = ARCHIVE_ROOT if kind == "episodes" else LOG_ROOT
    return (
        f"{root}/{tenant_id}/{kind}/{iso_week(first_ms)}/{first_ms:013d}-{first_id}{ARCHIVE_SUFFIX}"
    )


def parse_archive_key(key: str) -> tuple[str, ArchiveKind, str] | None:
    """(tenant, kind, iso week) of an archive key, or None for any other key."""
    parts = key.split("/")
    if (
        len(parts) != 5
        or parts[0] not in (ARCHIVE_ROOT, LOG_ROOT)
        or not parts[4].endswith(ARCHIVE_SUFFIX)
    ):
        return None
    kind = parts[2]
    if kind == "episodes" and parts[0] == ARCHIVE_ROOT:
        return parts[1], "episodes", parts[3]
    if kind == "runs":
        return parts[1], "runs", parts[3]
    if kind == "events":
        return parts[1], "events", parts[3]
    return None


def _row_for_archive(row: dict[str, Any], kind: ArchiveKind) -> dict[str, Any]:
    out = dict(row)
    for column in JSON_COLUMNS[kind]:
        value = out.get(column)
        if isinstance(value, str):
            out[column] = json.loads(value)
    return out


def row_from_archive(row: dict[str, Any], kind: ArchiveKind) -> dict[str, Any]:
    """The row as the table stores it (JSON columns encoded again), e.g. for a restore."""
    out = dict(row)
    for column in JSON_COLUMNS[kind]:
        if column in out and out[column] is not None:
            out[column] = json.dumps(out[column], separators=(",", ":"), ensure_ascii=False)
    return out


def encode_archive(rows: Iterable[dict[str, Any]], kind: ArchiveKind) -> bytes:
    """Rows → gzip(NDJSON), byte-for-byte the same for the same rows."""
    lines = [
        json.dumps(
            _row_for_archive(row, kind),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
        for row in rows
    ]
    text = "".join(line + "\n" for line in lines)
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


def decode_archive(data: bytes) -> list[dict[str, Any]]:
    """gzip(NDJSON) → rows as archived (JSON columns decoded)."""
    text = gzip.decompress(data).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def encode_lines(rows: Sequence[dict[str, Any]]) -> bytes:
    """Re-encode rows already in archive form (after an erase removed some)."""
    text = "".join(
        json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        for row in rows
    )
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
