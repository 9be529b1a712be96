"""`dev` and `migrate`: run the local runtime."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from local_runtime.commands.common import command


def cmd_dev(args: argparse.Namespace) -> int:
    from local_runtime.runtime import LocalRuntime
    from local_runtime.server import serve

    runtime = LocalRuntime.open(args.state)
    print(f"agent-memory: serving on http://{args.host}:{args.port} (state {runtime.state.root})")
    serve(runtime, host=args.host, port=args.port)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from local_runtime.runtime import LocalRuntime

    runtime = LocalRuntime.open(args.state)
    applied = asyncio.run(runtime.migrate())
    print("\n".join(applied) if applied else "no migrations to apply")
    return 0


def register(sub: Any) -> None:
    dev = command(sub, "dev", cmd_dev, "serve the Worker locally (no Cloudflare account needed)")
    dev.add_argument("--port", type=int, default=8790)  # local_runtime.server.DEFAULT_PORT
    dev.add_argument("--host", default="127.0.0.1")
    command(sub, "migrate", cmd_migrate, "apply pending D1 migrations to the state folder")
