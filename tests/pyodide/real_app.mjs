// The project's real app inside Pyodide 314 with the real pydantic (pydantic-core's
// emscripten wheel from PyPI): start-up figures of the real `worker.entry`, no double but
// numpy's stub. Run by tests/pyodide/pyodide314.py for benchmarks/startup.py:
//
//   node tests/pyodide/real_app.mjs <config.json>
//
// config.json: {"src", "inPyodide" (tests/pyodide/py314), "site" (pydantic + pydantic-core
// unpacked), "deps": {"httpx": "<site-packages>/httpx", ...}, "kind": "libraries" | "entry" |
// "project", "preimport": [module names]}
//
// What Python gets: src/ (the app), py314/ (the in-Pyodide probe), pydantic with its compiled
// core, the venv's pure-Python packages, numpy's stub (py314/numpy_stub.py), the workers SDK's
// two workerd-private modules as models.mjs models them.
//
// Output, one JSON line on stdout: {"ok": true, "python", "pyodide", "loadSeconds",
// "result": <what the probe returned>} or {"ok": false, "error"}.

import { readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPyodide } from "pyodide-314";
import { compatFlags, entrypointHelper } from "./models.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const config = JSON.parse(readFileSync(process.argv[2], "utf8"));

function announce(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function startPyodide() {
  const started = performance.now();
  const pyodide = await loadPyodide({ stdout: (s) => process.stderr.write(`${s}\n`) });
  const loadSeconds = (performance.now() - started) / 1000;
  const FS = pyodide.FS;
  const mount = (hostPath, path) => {
    FS.mkdirTree(path);
    FS.mount(FS.filesystems.NODEFS, { root: hostPath }, path);
  };
  mount(config.src, "/app/src");
  mount(config.inPyodide, "/app/driver");
  mount(config.site, "/app/site");
  FS.mkdirTree("/app/deps");
  for (const [name, path] of Object.entries(config.deps)) {
    if (statSync(path).isDirectory()) mount(path, `/app/deps/${name}`);
    else FS.writeFile(`/app/deps/${basename(path)}`, readFileSync(path));
  }
  FS.mkdirTree("/app/stubs");
  FS.writeFile("/app/stubs/numpy.py", readFileSync(join(config.inPyodide, "numpy_stub.py")));
  pyodide.registerJsModule("_pyodide_entrypoint_helper", entrypointHelper);
  pyodide.registerJsModule("_cloudflare_compat_flags", compatFlags);
  pyodide.runPython(`
import sys
sys.path[:0] = ["/app/site", "/app/deps", "/app/stubs", "/app/src", "/app/driver"]
sys.dont_write_bytecode = True
`);
  return { pyodide, loadSeconds };
}

function versions(pyodide) {
  return {
    python: pyodide.runPython("import sys; sys.version.split()[0]"),
    pyodide: pyodide.version,
  };
}

async function startup() {
  const { pyodide, loadSeconds } = await startPyodide();
  const probe = pyodide.pyimport("startup_probe");
  const result = JSON.parse(probe.measure(config.kind, JSON.stringify(config.preimport ?? [])));
  return { ...versions(pyodide), loadSeconds, result };
}

try {
  announce({ ok: true, ...(await startup()) });
  process.exit(0);
} catch (error) {
  announce({ ok: false, error: String(error?.stack ?? error) });
  process.exit(1);
}
