"""The raw-bytes erase test (issue 13): seed every store through the local runtime's public
routes over real HTTP — memory API writes (working, episodic, semantic with personal fields),
a memory search, agent runs (Durable Object run log and turn state, working memory,
episodes), a prune to the cold tier — erase the subject through its route, then read every
byte of every local store (SQLite files with their -wal and -shm, Durable Object files, the
cold archives raw and decompressed, the KV and vector files) and every log line the process
wrote: the subject's identifier and personal values occur nowhere.

Before the erase the same scan finds the identifier in every kind of store (so the scan can
fail) and the personal values in none of them (they are sealed at rest). Another subject's
identifier is still found afterwards (the erase is targeted, the scan sees live data).
"""

from __future__ import annotations

import gzip
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bindings.ports.clock import FixedClock
from local_runtime.access_dev import mint_token
from local_runtime.runtime import LocalRuntime
from local_runtime.server import running_server
from tests.fakes.embedder import HashingEmbedder
from worker.identity import ACCESS_HEADER

# One worker runs the whole module (--dist loadgroup), so its module-scoped
# seeded state is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("erase-raw-bytes")

TENANT = "acme"
# Unreserved characters only: a percent-encoded path or query would not hide them.
TOKEN = "zq7xkw"
SUBJECT = f"subject-{TOKEN}-ada"
EMAIL = f"ada.{TOKEN}@example.org"
PHONE = "+44 20 7946 0314"
PASSPORT = "X99218734"  # said in agent turns: plain text in run logs and episodes
# Every string of the subject: the identifier, a token of it (the keyword index stores
# tokens, not whole identifiers), the personal values.
NEEDLES = (SUBJECT, TOKEN, EMAIL, PHONE, "7946 0314", PASSPORT)
OTHER = "subject-kv9pw2-bob"
OPERATOR = "ops@example.com"  # a platform admin of the local runtime (LOCAL_VARS)
DAY = 86_400.0


class Captured(logging.Handler):
    """Every log record of the process, formatted with its arguments and traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclass
class Scan:
    """Where each needle was found: store kind -> list of 'file: needle'."""

    hits: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, where: str) -> None:
        self.hits.setdefault(kind, []).append(where)

    def kinds(self) -> set[str]:
        return set(self.hits)


def kind_of(root: Path, path: Path) -> str:
    relative = path.relative_to(root)
    if relative.parts[0] == "durable_objects":
        return "durable_objects"
    if relative.parts[0] == "cold":
        return "cold"
    return path.name.split(".")[0]  # d1, kv, vectors, ...


def scan(root: Path, logs: list[str], needles: tuple[str, ...]) -> Scan:
    """Search the raw bytes of every file under `root` (gzip archives also decompressed)
    and the captured log lines for each needle."""
    found = Scan()
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        raw = path.read_bytes()
        texts = [raw]
        if raw[:2] == b"\x1f\x8b":
            texts.append(gzip.decompress(raw))
        for needle in needles:
            if any(needle.encode() in text for text in texts):
                found.add(kind_of(root, path), f"{path.relative_to(root)}: {needle}")
    for line in logs:
        for needle in needles:
            if needle in line:
                found.add("logs", f"{line[:200]}: {needle}")
    return found


@dataclass
class Seeded:
    before: Scan
    after: Scan
    other_after: Scan
    erase: dict[str, Any]
    logs: list[str]


def seed(client: httpx.Client, access: str, subject: str, agent_id: str) -> None:
    """One subject in every store, through the public routes."""
    minted = client.post(
        f"/admin/tenants/{TENANT}/memory-tokens",
        json={"agent_id": agent_id, "tiers": ["working", "episodic", "semantic"]},
        headers={ACCESS_HEADER: access},
    )
    assert minted.status_code == 201, minted.text
    bearer = {"authorization": f"Bearer {minted.json()['token']}"}
    writes = [
        {
            "tier": "semantic",
            "key": subject,
            "value": f"{subject} prefers to be reached by email",
            "metadata": {"_personal": ["email", "phone"], "email": EMAIL, "phone": PHONE},
        },
        {"tier": "working", "key": "current-contact", "value": {"contact": subject}},
        {"tier": "episodic", "key": "last-call", "value": f"called {subject} about the renewal"},
    ]
    for body in writes:
        if subject != SUBJECT and body["tier"] == "semantic":
            body["metadata"] = {}
        response = client.post(f"/api/v1/memory/{agent_id}", json=body, headers=bearer)
        assert response.status_code == 201, response.text
    searched = client.get(
        f"/api/v1/memory/{agent_id}", params={"query": f"how to reach {subject}"}, headers=bearer
    )
    assert searched.status_code == 200, searched.text
    # The third turn runs on an agent instance named after the subject (issue 26: its
    # agent_instances row, alarm, turn_state and lifecycle rows outlived the erase).
    for turn, instance in enumerate((f"inst-{agent_id}", f"inst-{agent_id}", subject)):
        run = client.post(
            f"/v1/agents/{TENANT}/assistant/run",
            json={
                "input": f"Follow up with {subject} about the renewal ({turn})",
                "subject": subject,
                "instance_id": instance,
            },
            headers={ACCESS_HEADER: access},
        )
        assert run.status_code == 200, run.text
        # The run view waits for the instance's pending episodic writes.
        detail = client.get(
            f"/admin/agents/{TENANT}/runs/{run.json()['run_id']}", headers={ACCESS_HEADER: access}
        )
        assert detail.status_code == 200, detail.text


def wait_for_alarm_passes(runtime: LocalRuntime) -> None:
    """The dev server fires due alarms once a second: wait for a pass that started after
    the clock moved (two completed passes), as tests/test_local_server.py does."""
    passes = runtime.alarm_passes
    deadline = time.monotonic() + 30
    while runtime.alarm_passes < passes + 2:
        assert time.monotonic() < deadline, "the dev server's alarm loop did not run"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    root = tmp_path_factory.mktemp("raw-bytes") / "state"
    clock = FixedClock(1_750_000_000.0)
    runtime = LocalRuntime.open(root, embedder=HashingEmbedder(), clock=clock)
    captured = Captured()
    logger = logging.getLogger()
    old_level = logger.level
    logger.addHandler(captured)
    logger.setLevel(logging.DEBUG)
    try:
        with running_server(runtime) as base, httpx.Client(base_url=base, timeout=60) as client:

            def access() -> str:
                return mint_token(runtime.state.access, OPERATOR, now=clock.now())

            seed(client, access(), SUBJECT, "agent-ada")
            seed(client, access(), OTHER, "agent-bob")
            # One instance both subjects use, with enough turns that SQLite rebalances its
            # run log's pages (issue 47: copies of erased rows stayed in them).
            for turn in range(6):
                who = SUBJECT if turn % 2 else OTHER
                text = f"{who} (passport {PASSPORT}) asked about item {turn}. " * 3
                if who == OTHER:
                    text = f"{who} asked about the quarterly plan, item {turn}. " * 3
                ran = client.post(
                    f"/v1/agents/{TENANT}/assistant/run",
                    json={"input": text, "subject": who, "instance_id": "inst-shared"},
                    headers={ACCESS_HEADER: access()},
                )
                assert ran.status_code == 200, ran.text
            # 100 days later: the objects' idle alarms have fired (their run logs cleared,
            # each reported in agent_instances) and the prune moves the first runs,
            # episodes and events to cold.
            clock.advance(100 * DAY)
            wait_for_alarm_passes(runtime)
            pruned = client.post(
                f"/admin/tenants/{TENANT}/prune", json={}, headers={ACCESS_HEADER: access()}
            )
            assert pruned.status_code == 200, pruned.text
            # And a later turn, live in D1 and in the Durable Object again.
            seed(client, access(), SUBJECT, "agent-ada")
            before = scan(root, captured.lines, NEEDLES)
            erased = client.delete(
                f"/admin/tenants/{TENANT}/subjects/{SUBJECT}", headers={ACCESS_HEADER: access()}
            )
            assert erased.status_code == 200, erased.text
            # Read while the server still runs and every file is open: what the erase
            # left, not what closing the files (a WAL checkpoint) would clean up later.
            after = scan(root, captured.lines, NEEDLES)
            other_after = scan(root, captured.lines, (OTHER,))
        yield Seeded(before, after, other_after, erased.json(), captured.lines)
    finally:
        logger.removeHandler(captured)
        logger.setLevel(old_level)


def test_before_the_erase_the_subject_is_in_every_store_but_its_personal_values_in_none(
    seeded: Seeded,
) -> None:
    subject_kinds = {
        kind for kind, hits in seeded.before.hits.items() if any(SUBJECT in h for h in hits)
    }
    assert {"d1", "kv", "durable_objects", "cold"} <= subject_kinds
    # Vectors carry ids and numbers only: a vector a crash left without its row holds no text.
    assert "vectors" not in subject_kinds
    personal = [
        hit for hits in seeded.before.hits.values() for hit in hits if hit.endswith((EMAIL, PHONE))
    ]
    assert personal == []  # sealed at rest: not in D1, archives, KV, vectors, logs


def test_the_erase_reaches_everything_and_reports_it(seeded: Seeded) -> None:
    body = seeded.erase
    assert body["complete"] and body["data_keys"] >= 1 and body["keyword_index_optimized"]
    assert body["facts"] >= 1 and body["episodes"] >= 1 and body["working_keys"] >= 1
    assert body["archives_rewritten"] + body["archives_deleted"] >= 1
    # The instance named after the subject was wiped whole (its database and alarm).
    assert body["agent_state"]["wiped"] == 1 and body["agent_state"]["turn_state"] >= 1


def test_after_the_erase_no_store_and_no_log_holds_a_byte_of_the_subject(seeded: Seeded) -> None:
    outside_objects = {k: v for k, v in seeded.after.hits.items() if k != "durable_objects"}
    assert outside_objects == {}
    # The scan still sees live data: the other subject is in D1 and archives (its working
    # memory expired with its 1 h TTL during the 100 days).
    assert {"d1", "cold"} <= seeded.other_after.kinds()
    # The logs were captured: the erase named the subject by its hash only, and the dev
    # server's request line for the erase route shows its path segments hashed.
    assert any(
        line.startswith("agent_memory.lifecycle.erase INFO erase acme/sha256:")
        for line in seeded.logs
    )
    assert any(
        line.startswith("local_runtime.server INFO DELETE /admin/tenants/~")
        and "/subjects/~" in line
        for line in seeded.logs
    )


def test_after_the_erase_no_durable_object_file_holds_a_byte_of_the_subject(
    seeded: Seeded,
) -> None:
    assert seeded.after.hits.get("durable_objects", []) == []
