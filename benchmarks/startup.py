"""Start-up and CPU: the Worker in real workerd per route kind, and its import in Pyodide.

    uv run python benchmarks/startup.py [--runs 5] [--repeat 3] [--src PATH]
                                        [--skip-workerd] [--skip-pyodide]

**In real workerd** (benchmarks/startup_workerd.mjs, the real-workerd tier's setup:
tests/workerd): the whole Worker on Python 3.14 (workerd's development bundle, npm
workerd-314), with the bindings wrangler.toml declares, from a fresh workerd per run:

* cold start to first response: `new Miniflare` until `/healthz` answered (workerd's start,
  the Python runtime's, `import worker.entry`, the request), wall and workerd CPU;
* CPU per request for each route kind (the gateway, MCP store/recall, Access, the memory
  API on every tier, OAuth, an agent turn through the Durable Object, the weekly prune):
  the first request (it imports its lazy modules) and the median of the later ones;
* beside it, a bare Python Worker (`Response("ok")`) on 3.13 (workerd 1.20260426.1, the
  offline 0.28.2 bundle) and on 3.14: the runtime's own floor, where 3.13 can still run (the
  app cannot: no pydantic-core wheel for Pyodide 0.28 offline).

CPU is the workerd process's, all threads (Linux /proc schedstat). Cloudflare's limits are
printed beside the figures: Worker startup 1 s (the global scope, measured at deploy, where
a Python Worker's import is snapshotted: locally nothing is, so the cold start here is an
upper bound), CPU per request 10 ms (Free) and 30 s by default, up to 5 min (Paid)
(developers.cloudflare.com/workers/platform/limits).

**In Pyodide 314 under Node** (the import's anatomy): `import pydantic` (with `BaseModel`)
and `import httpx` beside `import worker.entry`, and the project's own share: a fresh
interpreter first imports every non-project module an `import worker.entry` loaded, then
times `import worker.entry`; what remains is the project's module bodies and what they
build. CPU of the thread running Pyodide (`process.threadCpuUsage()`).

Medians over `--runs` fresh processes (default 5); `--runs 1 --repeat 2` is the quick smoke
run CI makes. `--src` measures another checkout's src/ in Pyodide. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pyodide.pyodide314 import node, run_harness  # noqa: E402
from tests.worker_dependencies import top_level_modules  # noqa: E402
from tests.workerd import conftest as tier  # noqa: E402

SHARED = tier.WORKERD_PYTHON
BARE_WORKER = """from workers import Response, WorkerEntrypoint


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("ok")
"""
LIMITS = {
    "startup_s": 1.0,
    "cpu_per_request_free_ms": 10,
    "cpu_per_request_paid_default_s": 30,
    "cpu_per_request_paid_max_s": 300,
}


def measure(kind: str, src: Path, preimport: list[str] | None = None) -> dict[str, Any]:
    answer = run_harness({"kind": kind, "preimport": preimport or [], "src": str(src)})
    result: dict[str, Any] = answer["result"]
    result["versions"] = f"Python {answer['python']}, Pyodide {answer['pyodide']}"
    return result


def median(rows: list[dict[str, Any]], key: str, clock: str = "cpu") -> float:
    return statistics.median(float(row[key][clock]) for row in rows)


def pyodide(args: argparse.Namespace) -> dict[str, Any]:
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
    return figures


def runtime(bin_path: Path, bundle: Path, date: str, flags: list[str]) -> dict[str, Any]:
    return {
        "wrapper": str(ROOT / "tests" / "workerd" / "workerd"),
        "workerdBin": str(bin_path),
        "bundleDir": str(bundle),
        "packageDir": str(SHARED / "pkgcache"),
        "date": date,
        "flags": flags,
    }


def workerd(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="startup-workerd-"))
    config = tier.worker_config(None, folder)
    bare = folder / "bare"
    bare.mkdir()
    (bare / "entry.py").write_text(BARE_WORKER)
    sdk = top_level_modules("workers-runtime-sdk")
    workerd_313 = ROOT / "node_modules" / "@cloudflare" / "workerd-linux-64" / "bin" / "workerd"
    config |= {
        "runs": args.runs,
        "repeat": args.repeat,
        "bare": {"src": str(bare), "vendored": sdk},
        "runtimes": {
            "3.14": runtime(
                tier.pinned_workerd_binary(),
                tier.DEV_BUNDLE,
                config["compatibilityDate"],
                config["compatibilityFlags"],
            ),
            "3.13": runtime(workerd_313, SHARED / "cache", "2026-04-21", ["python_workers"]),
        },
    }
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [node(), str(ROOT / "benchmarks" / "startup_workerd.mjs"), str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(
            f"startup_workerd.mjs failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
    measured = json.loads(lines[-1])

    def cold(rows: list[dict[str, Any]], clock: str) -> float:
        return round(statistics.median(row["coldStart"][clock] for row in rows), 1)

    def per_route(name: str, clock: str, first: bool) -> float | None:
        values = [
            call[clock]
            for run in measured["app314"]
            for call in (run["routes"][name][:1] if first else run["routes"][name][1:])
        ]
        return round(statistics.median(values), 1) if values else None

    routes = list(measured["app314"][0]["routes"])
    statuses = {
        name: sorted({str(c["status"]) for r in measured["app314"] for c in r["routes"][name]})
        for name in routes
    }
    figures: dict[str, Any] = {
        "runs": args.runs,
        "repeat": args.repeat,
        "clock": "ms of workerd's CPU (all threads) and of wall time",
        "limits": LIMITS,
        "cold_start_ms": {
            "app 3.14": {
                "cpu": cold(measured["app314"], "cpuMs"),
                "wall": cold(measured["app314"], "wallMs"),
            },
            **{
                f"bare {v}": {"cpu": cold(rows, "cpuMs"), "wall": cold(rows, "wallMs")}
                for v, rows in measured["bare"].items()
            },
        },
        "bare_request_cpu_ms": {
            v: round(statistics.median(c["cpuMs"] for r in rows for c in r["warm"]), 2)
            for v, rows in measured["bare"].items()
        },
        "routes_ms": {
            name: {
                "first_cpu": per_route(name, "cpuMs", True),
                "later_cpu": per_route(name, "cpuMs", False),
                "later_wall": per_route(name, "wallMs", False),
                "statuses": statuses[name],
            }
            for name in routes
        },
    }
    print()
    print(f"real workerd, medians of {args.runs} fresh workerd (CPU: workerd, all threads)")
    print("  cold start to first response     CPU ms   wall ms   (Cloudflare: startup 1 s)")
    for name, row in figures["cold_start_ms"].items():
        print(f"    {name:<31} {row['cpu']:8.1f} {row['wall']:9.1f}")
    bare_cpu = figures["bare_request_cpu_ms"]
    print(f"  bare Worker, CPU per request: 3.13 {bare_cpu['3.13']} ms, 3.14 {bare_cpu['3.14']} ms")
    print("  the app on 3.14, CPU per request  first ms  later ms  (Free 10 ms; Paid 30 s)")
    for name, row in figures["routes_ms"].items():
        later = "-" if row["later_cpu"] is None else f"{row['later_cpu']:8.1f}"
        print(f"    {name:<31} {row['first_cpu']:8.1f} {later:>9}  {'/'.join(row['statuses'])}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    parser.add_argument("--repeat", type=int, default=3, help="requests per route kind")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the src/ for Pyodide")
    parser.add_argument("--skip-workerd", action="store_true")
    parser.add_argument("--skip-pyodide", action="store_true")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    if not args.skip_workerd:
        figures["workerd"] = workerd(args)
    if not args.skip_pyodide:
        figures["pyodide"] = pyodide(args)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
