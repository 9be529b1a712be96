// The real-workerd tier: runs the project's real `src/worker/entry.py` as a Python Worker in
// real workerd (Miniflare + the offline Python runtime bundle of ../shared/workerd-python),
// runs the checks of checks.mjs against it, and prints their results as one JSON line.
//
//   MINIFLARE_WORKERD_PATH=<workerd-python>/workerd node tests/workerd/harness.mjs <config.json>
//
// config.json (written by tests/workerd/conftest.py from wrangler.toml and the venv):
//   {"src": "<repo>/src", "doubles": "<repo>/tests/workerd/doubles",
//    "vendored": {"workers": "<site-packages>/workers", "httpx": ..., ...},
//    "main": "worker/entry.py",
//    "compatibilityDate": "...", "compatibilityFlags": [...], "vars": {...},
//    "crons": [...], "select": ["check id", ...] | null}
//
// The Worker is assembled the way `pywrangler deploy` / wrangler bundle it (checked with
// `wrangler deploy --dry-run --outdir`, wrangler 4.164): the main module is `entry.py` at
// the root of `base_dir` (src/), every other module under src/ keeps its path, and the
// vendored SDK and the Worker's pure-Python dependencies are `python_modules/<package>/*` as
// Data modules (the SDK's .js files as ES modules),
// which workerd puts on sys.path ahead of its own (cheat sheet §0; wrangler
// find-additional-modules.ts). Modules replaced by doubles (tests/workerd/doubles/, see its
// README) take the place of the src/ module at the same path.
//
// Output: {"ok": true, "registered": [ids], "startupMs": n, "results": [{"id", "outcome":
// "passed"|"failed", "message", "duration"}]} or {"ok": false, "error": "..."}.
// No network: Miniflare and the signal server listen on 127.0.0.1.

import { readFileSync, readdirSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";
import { checks } from "./checks.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const config = JSON.parse(readFileSync(process.argv[2], "utf8"));

const WORKER_NAME = "agent-memory";
const EDGE_NAME = "edge";

function announce(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function filesUnder(folder) {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return name === "__pycache__" ? [] : filesUnder(path);
    return [path];
  });
}

const posix = (path) => path.split(sep).join("/");

/** The Python Worker's modules, named as wrangler names them (see the header). */
function pythonModules({ src, doubles, vendored, main }) {
  const replaced = new Map(
    filesUnder(doubles)
      .filter((path) => path.endsWith(".py"))
      .map((path) => [posix(relative(doubles, path)), path]),
  );
  const module = (name, file, type = "PythonModule") => ({
    type,
    path: join(src, name),
    contents: readFileSync(file),
  });
  // The main module comes first (Miniflare's rule) and is the real file, never a double.
  const modules = [module(main.split("/").pop(), join(src, main))];
  const names = [];
  for (const file of filesUnder(src)) {
    const name = posix(relative(src, file));
    if (!name.endsWith(".py") || name === main) continue;
    names.push(name);
    modules.push(module(name, replaced.get(name) ?? file));
  }
  const doublesOnly = [...replaced.keys()].filter((name) => !names.includes(name));
  for (const name of doublesOnly) modules.push(module(name, replaced.get(name)));
  // Pure-Python packages, vendored under python_modules/ as pywrangler does: the SDK and the
  // Worker's pure dependencies (httpx & co.), each a package folder or a single module file.
  for (const [name, path] of Object.entries(vendored)) {
    const files = statSync(path).isDirectory() ? filesUnder(path) : [path];
    for (const file of files) {
      const rel = statSync(path).isDirectory() ? `${name}/${posix(relative(path, file))}` : name;
      if (rel.endsWith(".pyc")) continue;
      const type = rel.endsWith(".js") ? "ESModule" : "Data";
      modules.push(module(`python_modules/${rel}`, file, type));
    }
  }
  return {
    modules,
    doubled: [...replaced.keys()].filter((name) => names.includes(name)).sort(),
    testOnly: doublesOnly.sort(),
  };
}

/** Loopback server the Worker's background work and alarms POST notes to (harness_signal.py). */
function startSignals() {
  const notes = new Map(); // name -> [note, ...]
  const waiters = new Map(); // name -> [{index, resolve}]
  const server = createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const name = decodeURIComponent(new URL(request.url, "http://x").pathname.slice(1));
      const list = notes.get(name) ?? [];
      list.push(JSON.parse(Buffer.concat(chunks).toString("utf8") || "null"));
      notes.set(name, list);
      for (const waiter of waiters.get(name) ?? []) {
        if (waiter.index < list.length) waiter.resolve(list[waiter.index]);
      }
      response.writeHead(200, { "content-type": "text/plain" });
      response.end("ok");
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      resolve({
        server,
        url: `http://127.0.0.1:${server.address().port}`,
        /** The `index`-th note (from 0) signalled under `name`, whenever it arrives. */
        note(name, index = 0) {
          const list = notes.get(name) ?? [];
          if (index < list.length) return Promise.resolve(list[index]);
          return new Promise((done) => {
            const pending = waiters.get(name) ?? [];
            pending.push({ index, resolve: done });
            waiters.set(name, pending);
          });
        },
        count: (name) => (notes.get(name) ?? []).length,
      });
    });
  });
}

let miniflare;
let signals;

async function main() {
  signals = await startSignals();
  const { modules, doubled, testOnly } = pythonModules(config);
  const started = Date.now();
  miniflare = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    cf: false,
    log: new Log(LogLevel.WARN),
    handleRuntimeStdio(stdout, stderr) {
      stdout.pipe(process.stderr);
      stderr.pipe(process.stderr);
    },
    workers: [
      {
        name: WORKER_NAME,
        modulesRoot: config.src,
        modules,
        compatibilityDate: config.compatibilityDate,
        compatibilityFlags: config.compatibilityFlags,
        bindings: { ...config.vars, TIER_SIGNAL_URL: signals.url },
        kvNamespaces: { KV: "tier-kv" },
        d1Databases: { DB: "tier-d1" },
        r2Buckets: { COLD: "tier-cold" },
        durableObjects: { AGENT_RUNTIME: { className: "AgentRuntime", useSQLite: true } },
      },
      {
        name: EDGE_NAME,
        modules: true,
        modulesRoot: here,
        scriptPath: join(here, "edge.js"),
        compatibilityDate: config.compatibilityDate,
        serviceBindings: { PYTHON: WORKER_NAME },
      },
    ],
  });
  const url = await miniflare.ready;
  const startupMs = Date.now() - started;
  const context = {
    miniflare,
    url,
    signals,
    config,
    env: await miniflare.getBindings(WORKER_NAME),
    worker: await miniflare.getWorker(WORKER_NAME),
    edge: await miniflare.getWorker(EDGE_NAME),
  };
  const selected = config.select ? checks.filter((c) => config.select.includes(c.id)) : checks;
  // Concurrently: each check uses its own keys, tables, objects and tags, and the alarm
  // retry (workerd waits 2 s before it) overlaps the rest.
  const results = await Promise.all(
    selected.map(async ({ id, run }) => {
      const begun = Date.now();
      try {
        await run(context);
        return { id, outcome: "passed", message: "", duration: Date.now() - begun };
      } catch (error) {
        const message = String(error?.stack ?? error);
        return { id, outcome: "failed", message, duration: Date.now() - begun };
      }
    }),
  );
  announce({
    ok: true,
    registered: checks.map((c) => c.id),
    doubled,
    testOnly,
    startupMs,
    results,
  });
}

async function stop(code) {
  try {
    signals?.server.closeAllConnections();
    signals?.server.close();
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
