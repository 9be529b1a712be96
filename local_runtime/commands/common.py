"""Options and helpers shared by CLI commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from local_runtime.state import DEFAULT_STATE_DIR


def add_state_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        type=Path,
        default=DEFAULT_STATE_DIR,
        help=f"state folder of the local runtime (default {DEFAULT_STATE_DIR})",
    )
