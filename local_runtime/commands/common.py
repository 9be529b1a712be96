"""Options and helpers shared by CLI commands."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from local_runtime.state import DEFAULT_STATE_DIR

T = TypeVar("T")


def command(
    sub: Any, name: str, func: Callable[[argparse.Namespace], int], help: str, *positionals: str
) -> argparse.ArgumentParser:
    """The command `name` of the subparsers `sub`: its positionals, `--state`, and `func`."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help)
    for positional in positionals:
        parser.add_argument(positional)
    parser.add_argument(
        "--state",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help=f"state folder of the local runtime (default {DEFAULT_STATE_DIR})",
    )
    parser.set_defaults(func=func)
    return parser


def open_runtime(args: argparse.Namespace) -> Any:
    """The migrated local runtime of `--state`."""
    from local_runtime.runtime import LocalRuntime

    runtime = LocalRuntime.open(args.state)
    asyncio.run(runtime.migrate())
    return runtime


def run_with(runtime: Any, work: Callable[[Any], Awaitable[T]]) -> T:
    """`work(runtime)` run to the end; the runtime is closed after it, failed or not."""

    async def go() -> T:
        try:
            return await work(runtime)
        finally:
            await runtime.close()

    return asyncio.run(go())
