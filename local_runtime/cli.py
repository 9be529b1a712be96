"""`agent-memory`: the local runtime and the operator CLI.

Each feature adds its commands in its own module under `local_runtime/commands/` with a
`register(subparsers)` function; `COMMAND_MODULES` lists them.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

COMMAND_MODULES = [
    "local_runtime.commands.runtime",
    "local_runtime.commands.gateway",
    "local_runtime.commands.access",
    "local_runtime.commands.agents",
    "local_runtime.commands.bench",
    "local_runtime.commands.lifecycle",
    "local_runtime.commands.portability",
    "local_runtime.commands.namespace",
    "local_runtime.commands.tokens",
    "local_runtime.commands.operators",
    "local_runtime.commands.oauth",
    "local_runtime.commands.smoke",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-memory",
        description=(
            "Tiered agent memory on Cloudflare Python Workers: local runtime and operator CLI."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
