// The project's real app inside Pyodide 314 with the real pydantic (pydantic-core's
// emscripten wheel from PyPI): start-up figures and requests served by the real
// `worker.entry` / `worker.app`, no double. Run by tests/pyodide/pyodide314.py:
//
//   node tests/pyodide/real_app.mjs <config.json>
//
// config.json: {"src", "inPyodide" (tests/pyodide/py314), "site" (pydantic + pydantic-core
// unpacked), "deps": {"httpx": "<site-packages>/httpx", ...}, "mode": "startup" | "serve",
//   startup: "kind": "libraries" | "entry" | "project", "preimport": [module names]
//   serve:   "compatibilityDate", "vars": {NAME: string}, "migrations": [[file, [sql...]]],
//            "token", "apiKey"...: passed to py314/serve_real_app.py as is}
//
// What Python gets: src/ (the app), py314/ (the in-Pyodide drivers), pydantic with its
// compiled core, the venv's pure-Python packages, numpy's stub (py314/numpy_stub.py), the
// workers SDK's two workerd-private modules as models.mjs models them. In serve mode also
// `harness_js`: real KV, D1, R2 and the rate limiter from Miniflare (workerd in another
// process), the JS models of Workers AI, Vectorize and the ExecutionContext.
//
// Output, one JSON line on stdout: {"ok": true, "python", "pyodide", "loadSeconds",
// "result": <what the Python driver returned>} or {"ok": false, "error"}.

import { readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadPyodide } from "pyodide-314";
import { workerdEnv } from "./bindings.mjs";
import { Ai, compatFlags, entrypointHelper, ExecutionContext, VectorizeIndexImpl } from "./models.mjs";

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

let miniflare;

async function serve() {
  const { Log, LogLevel, Miniflare } = await import("miniflare");
  miniflare = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    modules: true,
    script: "export default { fetch() { return new Response(null, { status: 404 }); } };",
    compatibilityDate: config.compatibilityDate,
    kvNamespaces: { KV: "real-app-kv" },
    d1Databases: { DB: "real-app-d1" },
    r2Buckets: { COLD: "real-app-cold" },
    ratelimits: { EMBED_RATE_LIMITER: { simple: { limit: 120, period: 60 } } },
    cf: false,
    log: new Log(LogLevel.WARN),
    handleRuntimeStdio(stdout, stderr) {
      stdout.pipe(process.stderr);
      stderr.pipe(process.stderr);
    },
  });
  await miniflare.ready;
  const bindings = await miniflare.getBindings();
  // Each binding behind the class name workerd gives it (bindings.mjs), so the SDK wraps it.
  const env = {
    ...workerdEnv(bindings),
    AI: new Ai(),
    VECTORIZE: new VectorizeIndexImpl(384),
    ...config.vars,
  };
  const { pyodide, loadSeconds } = await startPyodide();
  pyodide.registerJsModule("harness_js", {
    env,
    newExecutionContext: () => new ExecutionContext(),
  });
  const driver = pyodide.pyimport("serve_real_app");
  const result = JSON.parse(await driver.serve(JSON.stringify(config)));
  return { ...versions(pyodide), loadSeconds, result };
}

try {
  const answer = config.mode === "serve" ? await serve() : await startup();
  announce({ ok: true, ...answer });
  await miniflare?.dispose();
  process.exit(0);
} catch (error) {
  announce({ ok: false, error: String(error?.stack ?? error) });
  await miniflare?.dispose().catch(() => {});
  process.exit(1);
}
