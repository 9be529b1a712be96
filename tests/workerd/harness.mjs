// The real-workerd tier: the project's whole Worker (`src/worker/entry.py` and everything it
// imports, real pydantic) as a Python Worker in real workerd, with the bindings wrangler.toml
// declares, then the checks of checks.mjs against it; their results as one JSON line.
//
//   MINIFLARE_WORKERD_PATH=tests/workerd/workerd node tests/workerd/harness.mjs <config.json>
//
// config.json is written by tests/workerd/conftest.py (read it for the keys). The Worker is
// assembled as wrangler + pywrangler upload it (checked with `wrangler deploy --dry-run
// --outdir`): the main module is `entry.py` at the root of `base_dir` (src/), every other
// module under src/ keeps its path, and the vendored packages are `python_modules/<name>/*`
// Data modules (the SDK's .js files as ES modules), which workerd puts on sys.path.
//
// Real: workerd, Python 3.14 (the dev bundle), the SDK, pydantic and pydantic-core, KV, D1,
// R2, the Durable Object (SQLite storage), the rate limiter, cron, the change feed's Queues. Stand-ins: Workers AI and
// Vectorize (stand_ins.mjs: wrapped bindings), the tool upstream and Cloudflare Access's
// certs (the Worker's outbound fetches, answered here in Node), numpy (a stub module).
//
// Output: {"ok": true, "registered": [ids], "startupMs", "results": [{"id", "outcome",
// "message", "duration"}], ...} or {"ok": false, "error"}. Loopback only.

import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";
import { checks } from "./checks.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const WORKER = "agent-memory";

function filesUnder(folder) {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return name === "__pycache__" ? [] : filesUnder(path);
    return [path];
  });
}

const posix = (path) => path.split(sep).join("/");

/** The Python Worker's modules, named as wrangler and pywrangler name them (header). */
export function pythonModules({ src, main, vendored }) {
  const module = (name, file, type = "PythonModule") => ({
    type,
    path: join(src, name),
    contents: readFileSync(file),
  });
  // The main module comes first (Miniflare's rule).
  const modules = [module(main.split("/").pop(), join(src, main))];
  for (const file of filesUnder(src)) {
    const name = posix(relative(src, file));
    if (name.endsWith(".py") && name !== main) modules.push(module(name, file));
  }
  for (const [name, path] of Object.entries(vendored)) {
    const folder = statSync(path).isDirectory();
    for (const file of folder ? filesUnder(path) : [path]) {
      const rel = folder ? `${name}/${posix(relative(path, file))}` : name;
      if (rel.endsWith(".pyc")) continue;
      modules.push(module(`python_modules/${rel}`, file, rel.endsWith(".js") ? "ESModule" : "Data"));
    }
  }
  return modules;
}

/** Outbound fetches of the Worker: Access's certs, the tool upstream and the webhook
 * endpoint, recorded (`webhooks` also wakes a check waiting for a delivery). */
function outbound(config, record, webhooks) {
  return async (request) => {
    const url = new URL(request.url);
    if (url.host === config.teamDomain && url.pathname === "/cdn-cgi/access/certs") {
      return Response.json(config.jwks);
    }
    if (request.url === config.upstream) {
      const body = await request.text();
      record.push({ method: request.method, url: request.url, body, headers: Object.fromEntries(request.headers) });
      return Response.json({ echoed: JSON.parse(body || "null") }, { headers: { "x-upstream": "tier" } });
    }
    if (request.url === config.hooks) {
      webhooks.push({ body: await request.text(), headers: Object.fromEntries(request.headers) });
      webhooks.arrived?.();
      return new Response(null, { status: 204 });
    }
    return new Response(`no stand-in for ${request.url}`, { status: 502 });
  };
}

/** The options of a Miniflare running the Worker of `config` (shared with benchmarks). */
export function workerOptions(config, { replies = [], upstream = [], webhooks = [] } = {}) {
  const standIns = `${readFileSync(config.models, "utf8")}\n${readFileSync(join(here, "stand_ins.mjs"), "utf8")}`;
  const wrapped = Object.fromEntries([
    ...config.vectorize.map((name) => [
      name,
      { scriptName: "stand-ins", entrypoint: "vectorize", bindings: { INDEX: name, DIMENSIONS: config.dimensions } },
    ]),
    [config.ai, { scriptName: "stand-ins", entrypoint: "ai" }],
  ]);
  const common = { compatibilityDate: config.compatibilityDate };
  return {
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
        name: WORKER,
        ...common,
        modulesRoot: config.src,
        modules: pythonModules(config),
        compatibilityFlags: config.compatibilityFlags,
        bindings: config.vars,
        kvNamespaces: Object.fromEntries(config.kv.map((b) => [b, `tier-${b}`])),
        d1Databases: Object.fromEntries(Object.keys(config.d1).map((b) => [b, `tier-${b}`])),
        r2Buckets: Object.fromEntries(config.r2.map((b) => [b, `tier-${b}`])),
        durableObjects: Object.fromEntries(
          Object.entries(config.durableObjects).map(([b, className]) => [b, { className, useSQLite: true }]),
        ),
        ratelimits: Object.fromEntries(
          Object.entries(config.ratelimits).map(([b, simple]) => [b, { simple }]),
        ),
        wrappedBindings: wrapped,
        // wrangler.toml's queues; batches leave at once here (the tier waits for them).
        queueProducers: Object.fromEntries(
          (config.queues?.producers ?? []).map((q) => [q.binding, { queueName: q.queue }]),
        ),
        queueConsumers: Object.fromEntries(
          (config.queues?.consumers ?? []).map((q) => [q.queue, {
            maxBatchSize: q.max_batch_size, maxBatchTimeout: 0, maxRetries: q.max_retries,
            deadLetterQueue: q.dead_letter_queue, retryDelay: q.retry_delay,
          }]),
        ),
        outboundService: outbound(config, upstream, webhooks),
      },
      {
        name: "stand-ins", // a wrapped binding takes its Worker's date
        modules: [{ type: "ESModule", path: join(here, "stand-ins.mjs"), contents: standIns }],
        serviceBindings: {
          SCRIPT: async () => {
            const reply = replies.shift();
            return reply === undefined ? new Response("no reply scripted", { status: 500 }) : Response.json(reply);
          },
        },
      },
      {
        name: "edge",
        ...common,
        modules: true,
        modulesRoot: here,
        scriptPath: join(here, "edge.js"),
        serviceBindings: { PYTHON: WORKER },
      },
    ],
  };
}

/** Apply every D1 migration and write the gateway's KV records, from outside the Worker. */
export async function seed(miniflare, config) {
  const env = await miniflare.getBindings(WORKER);
  for (const [binding, statements] of Object.entries(config.d1)) {
    await env[binding].batch(statements.map((sql) => env[binding].prepare(sql)));
  }
  for (const [key, value] of config.kvSeed) await env.KV.put(key, value);
  return env;
}

let miniflare;

async function main() {
  const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const replies = [];
  const upstream = [];
  const webhooks = [];
  const started = Date.now();
  miniflare = new Miniflare(workerOptions(config, { replies, upstream, webhooks }));
  await miniflare.ready;
  const startupMs = Date.now() - started;
  const context = {
    miniflare,
    config,
    replies,
    upstream,
    webhooks,
    env: await seed(miniflare, config),
    worker: await miniflare.getWorker(WORKER),
    edge: await miniflare.getWorker("edge"),
  };
  const selected = config.select ? checks.filter((c) => config.select.includes(c.id)) : checks;
  // One after another in file order: later checks build on what earlier ones wrote (a
  // memory token, a fact, an agent's episodes) as a user's session would.
  const results = [];
  for (const { id, run } of selected) {
    const begun = Date.now();
    try {
      await run(context);
      results.push({ id, outcome: "passed", message: "", duration: Date.now() - begun });
    } catch (error) {
      const message = String(error?.stack ?? error);
      results.push({ id, outcome: "failed", message, duration: Date.now() - begun });
    }
  }
  process.stdout.write(
    `${JSON.stringify({ ok: true, registered: checks.map((c) => c.id), startupMs, results })}\n`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  let code = 0;
  try {
    await main();
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ ok: false, error: String(error?.stack ?? error) })}\n`);
    code = 1;
  } finally {
    await miniflare?.dispose();
  }
  process.exit(code);
}
