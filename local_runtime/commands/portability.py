"""Exports, imports and the change feed's endpoints on the state folder (docs/portability.md).

An export shows a progress bar on stderr and writes the JSON Lines file (header first); one
stopped by a crash is finished by `--job ID`. An import is checked whole first, then written in
chunks and resumable: run the same command again and it goes on after the last chunk saved.
`webhooks` goes through the same routes as an operator (the local platform admin's token).
Each prints its result as JSON on stdout; an error is `{"error": {...}}` and exit code 1.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from local_runtime.commands.common import command, open_runtime, run_with

OPERATOR = "operator@localhost"
_open = open_runtime  # tests replace it to pick an embedder


def _run(args: argparse.Namespace, work: Callable[[Any], Awaitable[Any]]) -> int:
    """Run `work(runtime)`, print its result (or its error) as JSON."""
    from http_messages import CodedError

    try:
        result = run_with(_open(args), work)
    except CodedError as exc:
        print(json.dumps(exc.to_response().json(), indent=2))
        return 1
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    return 0


def _bar(job: Any) -> None:
    done, total = job.progress["records"], max(job.progress["estimate"], 1)
    filled = min(30, 30 * done // total)
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total} records, "
        f"part {job.progress['part'] - 1}"
    )
    sys.stderr.flush()


def cmd_export(args: argparse.Namespace) -> int:
    from agent_memory.lifecycle.portability import Personal, part_key
    from agent_memory.lifecycle.prune import json_lines
    from agent_memory.memory import Memory

    personal: Personal = "opened" if args.opened else "sealed"
    out = Path(args.out or f"{args.tenant}-{args.subject or 'export'}.jsonl")
    written: list[bytes] = []

    async def work(runtime: Any) -> Any:
        exporter = (await Memory.open(runtime.bindings(), args.tenant)).exporter()
        if args.subject:
            found = await exporter.subject(args.subject, by=OPERATOR, personal=personal)
            written.append(json_lines(found))
            return {"file": str(out), "records": len(found)}
        job = await exporter.jobs.get(args.job) if args.job else None
        job = job or await exporter.start(OPERATOR, personal)
        job = await exporter.advance(job.job_id, max_seconds=10.0**9, on_part=_bar)
        sys.stderr.write("\n")
        for part in range(job.progress["part"]):
            body = await runtime.cold.get(part_key(args.tenant, job.job_id, part))
            written.append(gzip.decompress(body.data))
        return {"file": str(out), **job.model_dump(include={"job_id", "status", "progress"})}

    code = _run(args, work)
    if written:
        out.write_bytes(b"".join(written))
    return code


def cmd_import(args: argparse.Namespace) -> int:
    from agent_memory.memory import Memory

    path = Path(args.file)
    digest = hashlib.sha256(f"{args.tenant}\0{args.format}\0".encode())
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    # The same file into the same tenant is the same job: running it again resumes it.
    job_id = digest.hexdigest()[:26].upper()

    def lines() -> Iterator[bytes]:
        with path.open("rb") as file:
            yield from file

    async def work(runtime: Any) -> Any:
        importer = (await Memory.open(runtime.bindings(), args.tenant)).importer()
        report = await importer.run(
            lines,
            args.format,
            dry_run=args.dry_run,
            by=OPERATOR,
            job_id=None if args.dry_run else job_id,
        )
        await runtime.background.drain()
        return report.model_dump()

    return _run(args, work)


def cmd_webhooks(args: argparse.Namespace) -> int:
    from http_messages import Headers, HttpRequest
    from local_runtime.access_dev import mint_token
    from worker.app import handle

    base = f"http://127.0.0.1/admin/tenants/{args.tenant}/webhooks"
    if args.add:
        method, path, body = "POST", base, {"url": args.add}
    elif args.test:
        method, path, body = "POST", f"{base}/{args.test}/test", None
    else:
        target = args.pause or args.resume or args.rotate
        change = {"status": "paused"} if args.pause else {"status": "active"}
        body = {"rotate_secret": True} if args.rotate else change
        method, path, body = ("PATCH", f"{base}/{target}", body) if target else ("GET", base, None)

    async def work(runtime: Any) -> Any:
        token = mint_token(runtime.state.access, OPERATOR, now=runtime.clock.now())
        headers = Headers({"cf-access-jwt-assertion": token, "content-type": "application/json"})
        data = b"" if body is None else json.dumps(body).encode()
        response = await handle(HttpRequest(method, path, headers, data), runtime.bindings())
        return response.json()

    return _run(args, work)


def register(sub: Any) -> None:
    help = "export a tenant (or one subject) as JSON Lines"
    export = command(sub, "export", cmd_export, help, "tenant")
    export.add_argument("--opened", action="store_true", help="personal data opened (an event)")
    export.add_argument("--out", help="the file to write (default TENANT-export.jsonl)")
    export.add_argument("--subject", help="only what concerns this data subject")
    export.add_argument("--job", help="finish this export (stopped by a crash)")

    help = "import JSON Lines into a tenant (resumable)"
    imp = command(sub, "import", cmd_import, help, "tenant", "file")
    imp.add_argument("--format", default="agent-memory", choices=["agent-memory", "mem0", "text"])
    imp.add_argument("--dry-run", action="store_true", help="report; write nothing")

    help = "the change feed's endpoints and deliveries"
    hooks = command(sub, "webhooks", cmd_webhooks, help, "tenant")
    for name in ("add", "test", "pause", "resume", "rotate"):
        hooks.add_argument(f"--{name}", metavar="URL" if name == "add" else "ENDPOINT_ID")
