"""The knowledge-update benchmark over the hand-written cases (issue 25).

    uv run python benchmarks/updates.py [--cases N] [--seed S] [--embedder minilm|hashing]

Same as `uv run agent-memory bench updates`: the cases in `benchmarks/data/update_cases.json`
stored through MCP `store_memory`, one reconcile per tenant, each question recalled; printed
for the rules alone and with a scripted oracle adjudicator: latest-first rate, false
supersession rate, identifier-distinct siblings kept, duplicates merged, and the share of
candidate pairs that reach the adjudicator. See `local_runtime/commands/bench_updates.py`.
A measurement script, not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from local_runtime.commands.bench_updates import add_arguments, cmd_bench_updates  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    sys.exit(cmd_bench_updates(parser.parse_args()))
