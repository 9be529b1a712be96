"""`agent-memory`: the local runtime and the operator CLI.

    agent-memory dev [--port 8787] [--state .state]   serve the Worker locally
    agent-memory migrate [--state .state]             apply D1 migrations to the state folder

Later commands (tokens, gateway tenants and keys, admin reads, benchmarks, lifecycle jobs)
are registered by `_commands()` below, one small function each.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from local_runtime.state import DEFAULT_STATE_DIR

Command = Callable[[argparse.Namespace], int]


def _add_state(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help=f"state folder holding KV, D1, Durable Objects and vectors (default {DEFAULT_STATE_DIR})",
    )


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-memory",
        description="Tiered agent memory on Cloudflare Python Workers: local runtime and operator CLI.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = sub.add_parser("dev", help="serve the Worker locally (no Cloudflare account needed)")
    dev.add_argument("--port", type=int, default=8787)
    dev.add_argument("--host", default="127.0.0.1")
    _add_state(dev)
    dev.set_defaults(func=cmd_dev)

    migrate = sub.add_parser("migrate", help="apply pending D1 migrations to the state folder")
    _add_state(migrate)
    migrate.set_defaults(func=cmd_migrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    func: Command = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
