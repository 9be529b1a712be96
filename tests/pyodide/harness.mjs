// Runs the in-Pyodide tests (tests/pyodide/py/test_*.py) inside real Pyodide, against real
// workerd bindings, and prints their results as one JSON line on stdout.
//
//   node tests/pyodide/harness.mjs <config.json>
//
// config.json: {"src": "<repo>/src", "tests": "<repo>/tests/pyodide/py",
//               "deps": {"httpx": "<site-packages>/httpx", ...}, "compatibilityDate": "...",
//               "select": ["module::test", ...] | null}
//
// What Python gets (as `harness` in each test module, see py/harness_support.py):
//   * real Workers KV, D1, R2 and Rate Limiting bindings from Miniflare#getBindings() (workerd
//     in another process; every call crosses Pyodide's real FFI), each behind a class named
//     as workerd names it (bindings.mjs) so the workers SDK wraps it as it wraps the real one;
//   * `ctx.storage` of a real SQLite-backed Durable Object (do_storage.mjs);
//   * JS models (models.mjs) of ExecutionContext, DurableObjectState, Workers AI, Vectorize;
//   * a loopback HTTP upstream (for the fetch transport) that records what it received.
// The workers SDK (workers-runtime-sdk, pure Python) is loaded from the project's venv with
// models of the two workerd-private modules it imports.
//
// Output: {"ok": true, "python": "3.14.2", "pyodide": "314.0.7", "results": [{"id",
// "outcome": "passed"|"failed"|"error", "message", "traceback", "duration"}]} or
// {"ok": false, "error": "..."} when the harness itself could not start. No network:
// Miniflare and the upstream listen on 127.0.0.1; Pyodide loads from node_modules.

import { readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";
import { loadPyodide } from "pyodide-314";
import { workerdEnv } from "./bindings.mjs";
import { DurableObjectStorage, SyncBridge } from "./do_storage.mjs";
import {
  Ai,
  compatFlags,
  DurableObjectState,
  entrypointHelper,
  ExecutionContext,
  VectorizeIndexImpl,
} from "./models.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const config = JSON.parse(readFileSync(process.argv[2], "utf8"));

function announce(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/** A loopback upstream: `/redirect?to=<url>` answers 302; every request is recorded. */
async function startUpstream() {
  const received = [];
  const server = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const url = new URL(request.url, "http://127.0.0.1");
      received.push({
        method: request.method,
        path: url.pathname,
        query: url.search,
        headers: request.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      });
      if (url.pathname === "/hang") {
        // Never answers: the client's own timeout must end the request. (Closed when the
        // harness stops: closeAllConnections below.)
        return;
      }
      if (url.pathname === "/redirect") {
        response.writeHead(302, { location: url.searchParams.get("to"), "x-upstream": "1" });
        response.end("moved");
        return;
      }
      if (url.pathname === "/gzip") {
        // A compressed body: fetch decompresses it, so the transport must not let httpx
        // decode it a second time.
        import("node:zlib").then(({ gzipSync }) => {
          response.writeHead(200, { "content-encoding": "gzip", "content-type": "text/plain" });
          response.end(gzipSync(Buffer.from("hello, compressed")));
        });
        return;
      }
      const status = Number(url.searchParams.get("status") ?? 200);
      response.writeHead(status, {
        "content-type": "application/json",
        "set-cookie": ["a=1", "b=2"],
      });
      response.end(JSON.stringify({ method: request.method, path: url.pathname }));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, received, url: `http://127.0.0.1:${server.address().port}` };
}

let miniflare;
let bridge;
let upstream;

async function main() {
  miniflare = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    modules: true,
    modulesRoot: join(here, "..", "miniflare"),
    scriptPath: join(here, "..", "miniflare", "worker.js"),
    compatibilityDate: config.compatibilityDate,
    kvNamespaces: { KV: "pyodide-kv" },
    d1Databases: { DB: "pyodide-d1" },
    r2Buckets: { COLD: "pyodide-cold" },
    durableObjects: { OBJECTS: { className: "SqlObject", useSQLite: true } },
    // workerd's Rate Limiting binding (the memory API's per-tenant embedding budget).
    ratelimits: { EMBED_RATE_LIMITER: { simple: { limit: 3, period: 60 } } },
    cf: false,
    log: new Log(LogLevel.WARN),
    handleRuntimeStdio(stdout, stderr) {
      stdout.pipe(process.stderr);
      stderr.pipe(process.stderr);
    },
  });
  const url = await miniflare.ready;
  const env = await miniflare.getBindings();
  bridge = new SyncBridge(url.href);
  upstream = await startUpstream();

  let storageCount = 0;
  const harness = {
    // Each behind the class name workerd's binding has (bindings.mjs), so the SDK wraps it.
    env: workerdEnv(env),
    upstream: { url: upstream.url, received: upstream.received },
    /** A fresh Durable Object storage (a new object, so a new SQLite database). */
    newStorage() {
      storageCount += 1;
      return new DurableObjectStorage(bridge, `pyodide-${process.pid}-${storageCount}`);
    },
    /** workerd's own fetch(url, {redirect}) from inside the Worker: {status, location}. */
    async workerdFetch(target, redirect) {
      const response = await miniflare.dispatchFetch(new URL("/fetch", url), {
        method: "POST",
        body: JSON.stringify({ url: target, redirect }),
      });
      return await response.text();
    },
    newExecutionContext: () => new ExecutionContext(),
    newDurableObjectState(storage) {
      return new DurableObjectState(storage);
    },
    newWorkersAI: () => new Ai(),
    newVectorize: (dimensions) => new VectorizeIndexImpl(dimensions),
    /** Microtask/turn helper: resolves after pending microtasks and one macrotask. */
    nextTurn: () => new Promise((resolve) => setImmediate(resolve)),
    /** For each callback a storage's transactionSync received: was its proxy released
     * (any use of a destroyed PyProxy throws)? Checked in JS: a destroyed proxy cannot
     * even be handed back to Python. */
    transactionCallbacksReleased(storage) {
      return storage.transactionSyncCallbacks.map((callback) => {
        try {
          callback.toString();
          return false;
        } catch (error) {
          return /destroyed/.test(String(error?.message ?? error));
        }
      });
    },
  };

  const pyodide = await loadPyodide({ stdout: (s) => process.stderr.write(`${s}\n`) });
  const FS = pyodide.FS;
  const mount = (hostPath, path) => {
    FS.mkdirTree(path);
    FS.mount(FS.filesystems.NODEFS, { root: hostPath }, path);
  };
  mount(config.src, "/app/src");
  mount(config.tests, "/app/tests");
  FS.mkdirTree("/app/deps");
  for (const [name, path] of Object.entries(config.deps)) {
    if (statSync(path).isDirectory()) mount(path, `/app/deps/${name}`);
    else FS.writeFile(`/app/deps/${basename(path)}`, readFileSync(path));
  }

  pyodide.registerJsModule("_pyodide_entrypoint_helper", entrypointHelper);
  pyodide.registerJsModule("_cloudflare_compat_flags", compatFlags);
  pyodide.registerJsModule("harness_js", harness);

  pyodide.runPython(`
import sys
sys.path[:0] = ["/app/deps", "/app/src", "/app/tests"]
sys.dont_write_bytecode = True
`);
  const runner = pyodide.pyimport("runner");
  const resultsJson = await runner.run_all(JSON.stringify(config.select ?? null));
  const results = JSON.parse(resultsJson);
  announce({
    ok: true,
    python: pyodide.runPython("import sys; sys.version.split()[0]"),
    pyodide: pyodide.version,
    results,
  });
}

async function stop(code) {
  try {
    upstream?.server.closeAllConnections();
    upstream?.server.close();
    await bridge?.close();
    await miniflare?.dispose();
  } finally {
    process.exit(code);
  }
}

try {
  await main();
  await stop(0);
} catch (error) {
  announce({ ok: false, error: String(error?.stack ?? error) });
  await stop(1);
}
