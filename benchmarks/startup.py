"""Start-up: `import worker.entry` inside Pyodide with the real pydantic, beside pydantic's own.

    uv run python benchmarks/startup.py [--runs 5] [--src PATH]

Cloudflare runs a Python Worker's top-level import at deploy and snapshots it, with a CPU
limit on that start-up (about 1 s). This measures it in npm Pyodide 314 (Python 3.14) with
pydantic-core's emscripten wheel from PyPI (pydantic 2.14; downloaded once into the
gitignored `.cache/pyodide-314/`), numpy stubbed (tests/pyodide/py314/numpy_stub.py),
httpx, the stemmer and the workers SDK from the venv. The deploy runs Pyodide 0.28.2 with
pydantic 2.10.6, for which no pydantic-core wheel can be had here: the figures are for
comparing the project's share with pydantic's in the same run, not Cloudflare's seconds.

Every figure comes from a fresh interpreter (a new Node process) per measurement:

* `import pydantic` (with `pydantic.BaseModel`: the package is lazy) and `import httpx`;
* `import worker.entry`: the total, and the modules it loaded (the project's, all);
* the project's own share: a fresh interpreter first imports every non-project module that
  an `import worker.entry` loaded (stdlib, pydantic, httpx, the workers SDK...), then times
  `import worker.entry`. What remains is the project's module bodies and what they build
  (pydantic models, compiled patterns). Any non-project module the timed import still had
  to load is printed (then its cost is in the share, so the share errs high).

Medians over `--runs` (default 5); `--runs 1` is the quick smoke run CI makes (about
20 s). `--src` measures another checkout's src/ (e.g. an older commit's, side by side).
The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pyodide.pyodide314 import run_harness  # noqa: E402


def measure(kind: str, src: Path, preimport: list[str] | None = None) -> dict[str, Any]:
    answer = run_harness(
        {"mode": "startup", "kind": kind, "preimport": preimport or [], "src": str(src)}
    )
    result: dict[str, Any] = answer["result"]
    result["versions"] = f"Python {answer['python']}, Pyodide {answer['pyodide']}"
    return result


def median(rows: list[dict[str, Any]], key: str, clock: str = "cpu") -> float:
    return statistics.median(float(row[key][clock]) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per figure")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the src/ to measure")
    args = parser.parse_args()
    src = args.src.resolve()

    libraries, entries, projects = [], [], []
    for run in range(args.runs):
        entry = measure("entry", src)
        entries.append(entry)
        projects.append(measure("project", src, entry["other_modules"]))
        libraries.append(measure("libraries", src))
        print(
            f"run {run + 1}/{args.runs} (CPU s): pydantic {libraries[-1]['pydantic']['cpu']:.3f}, "
            f"httpx {libraries[-1]['httpx']['cpu']:.3f}, worker.entry {entry['entry']['cpu']:.3f}, "
            f"project share {projects[-1]['project']['cpu']:.3f}",
            flush=True,
        )

    rows = {
        "import_pydantic": (libraries, "pydantic"),
        "import_httpx": (libraries, "httpx"),
        "import_worker_entry": (entries, "entry"),
        "project_share": (projects, "project"),
    }
    cpu = {name: median(table, key) for name, (table, key) in rows.items()}
    wall = {name: median(table, key, "wall") for name, (table, key) in rows.items()}
    last = entries[-1]
    late = sorted({name for row in projects for name in row["late_others"]})
    failed = sorted({name for row in projects for name in row["preimport_failed"]})
    ratio = cpu["project_share"] / cpu["import_pydantic"]
    figures: dict[str, Any] = {
        "runs": args.runs,
        "versions": last["versions"],
        "clock": "CPU seconds of the thread running Pyodide (wall seconds in *_wall_s)",
        **{f"{name}_s": round(value, 3) for name, value in cpu.items()},
        **{f"{name}_wall_s": round(value, 3) for name, value in wall.items()},
        "project_share_over_pydantic": round(ratio, 2),
        "modules_total": last["modules"],
        "modules_project": len(last["project_modules"]),
        "numpy_imported_at_start_up": last["numpy_imported"],
        "late_non_project_modules": late,
        "preimport_failed": failed,
    }
    print()
    print(f"start-up in {figures['versions']}, medians of {args.runs} fresh interpreters")
    print("                                CPU s    wall s")
    labels = {
        "import_pydantic": "import pydantic",
        "import_httpx": "import httpx",
        "import_worker_entry": "import worker.entry (total)",
        "project_share": "the project's own share",
    }
    for name, label in labels.items():
        print(f"  {label:<29} {cpu[name]:6.3f}   {wall[name]:6.3f}")
    print(f"  project share / pydantic      {ratio:.2f} x")
    print(
        f"  modules loaded by the import  {figures['modules_total']} "
        f"({figures['modules_project']} of them the project's)"
    )
    print(f"  numpy imported at start-up    {'yes' if last['numpy_imported'] else 'no'}")
    if late:
        print(f"  non-project modules left in the share: {', '.join(late)}")
    if failed:
        print(f"  could not pre-import: {', '.join(failed)}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
