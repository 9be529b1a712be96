// benchmarks/startup.py's real-workerd part: cold start to first response and CPU per request
// of each route kind, the whole Worker on Python 3.14 (the development bundle, as the
// real-workerd tier runs it), and a bare Python Worker on 3.13 and 3.14 side by side (the
// 3.13 runtime cannot load the app: no pydantic-core wheel for Pyodide 0.28 offline).
//
//   node benchmarks/startup_workerd.mjs <config.json>
//
// config.json (benchmarks/startup.py): the tier's config (tests/workerd/conftest.py) plus
// {"runs", "repeat", "runtimes": {"3.14": {workerdBin, bundleDir, packageDir, wrapper},
// "3.13": {...}}, "bare": {"src", "vendored", "flags313", "date313"}}.
//
// CPU is the workerd process's, all threads (Linux /proc/<pid>/task/*/schedstat, ns): what
// the runtime spent serving, the Python in it included. Prints one JSON line.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Log, LogLevel, Miniflare } from "miniflare";
import { pythonModules, seed, workerOptions } from "../tests/workerd/harness.mjs";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const BASE = "https://agent-memory.example";

/** The workerd Miniflare spawned (a child of this process). */
function workerdPid() {
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) === process.pid && stat.includes("(workerd)")) return pid;
    } catch {}
  }
  throw new Error("no workerd child process found");
}

function cpuNs(pid) {
  return readdirSync(`/proc/${pid}/task`).reduce(
    (sum, task) => sum + Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0]),
    0,
  );
}

function useRuntime(runtime) {
  Object.assign(process.env, {
    MINIFLARE_WORKERD_PATH: runtime.wrapper,
    WORKERD_BIN: runtime.workerdBin,
    PYODIDE_BUNDLE_DIR: runtime.bundleDir,
    PYODIDE_PACKAGE_DIR: runtime.packageDir,
  });
}

/** Start `options`, answer the first request: wall ms and workerd CPU ms until then. */
async function coldStart(options, first) {
  const started = performance.now();
  const miniflare = new Miniflare(options);
  await miniflare.ready;
  const response = await miniflare.dispatchFetch(`${BASE}${first}`);
  await response.arrayBuffer();
  const wall = performance.now() - started;
  const pid = workerdPid();
  return { miniflare, pid, coldStart: { status: response.status, wallMs: wall, cpuMs: cpuNs(pid) / 1e6 } };
}

async function measure(pid, action) {
  const cpu = cpuNs(pid);
  const started = performance.now();
  const status = await action();
  return { status, wallMs: performance.now() - started, cpuMs: (cpuNs(pid) - cpu) / 1e6 };
}

function bareOptions(runtime) {
  const { src, vendored } = config.bare;
  return {
    host: "127.0.0.1",
    port: 0,
    cf: false,
    log: new Log(LogLevel.WARN),
    workers: [
      {
        name: "bare",
        modulesRoot: src,
        modules: pythonModules({ src, main: "entry.py", vendored }),
        compatibilityDate: runtime.date,
        compatibilityFlags: runtime.flags,
      },
    ],
  };
}

const json = (body, headers = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
  body: JSON.stringify(body),
});

/** Each route kind: a request (or a cron event) built fresh for repeat `i`. */
function routeKinds(ctx) {
  const key = { authorization: `Bearer ${config.apiKey}` };
  const access = { "cf-access-jwt-assertion": config.access };
  const token = () => ({ authorization: `Bearer ${ctx.token}` });
  const mcp = (method, params) => json({ jsonrpc: "2.0", id: 1, method, params }, key);
  const memory = "/api/v1/memory/inst-1";
  const mint = () => json({ agent_type: "assistant", agent_id: "inst-1" }, access);
  return [
    ["health", () => ["/healthz"]],
    ["gateway tool call", () => ["/api/v1/tools/echo", json({ text: "hi" }, key)]],
    ["MCP tools/list", () => ["/mcp", mcp("tools/list", {})]],
    ["MCP store_memory", (i) => ["/mcp", mcp("tools/call", { name: "store_memory", arguments: { content: `Fact number ${i} about the staging database` } })]],
    ["MCP recall_memory", () => ["/mcp", mcp("tools/call", { name: "recall_memory", arguments: { query: "staging database" } })]],
    ["Access-gated admin (mint token)", () => [`/admin/tenants/${config.tenant}/memory-tokens`, mint()]],
    ["memory API working write", (i) => [memory, json({ tier: "working", key: `k${i}`, value: { i } }, token())]],
    ["memory API working read", () => [`${memory}?tier=working`, { headers: token() }]],
    ["memory API episodic write", (i) => [memory, json({ tier: "episodic", key: `e${i}`, value: `Episode ${i}` }, token())]],
    ["memory API semantic write", (i) => [memory, json({ tier: "semantic", key: `s${i}`, value: `Semantic fact ${i}` }, token())]],
    ["memory API semantic search", () => [`${memory}?tier=semantic&query=semantic%20fact`, { headers: token() }]],
    ["memory API procedural read", () => [`${memory}?tier=procedural&agent_type=assistant`, { headers: token() }]],
    ["OAuth metadata", () => ["/.well-known/oauth-authorization-server"]],
    ["agent run (Durable Object)", (i) => {
      ctx.replies.push({ text: `Answer ${i}` });
      return [`/v1/agents/${config.tenant}/assistant/run`, json({ input: `Question ${i}`, instance_id: "inst-1" }, access)];
    }],
    ["cron weekly prune", () => ({ cron: "0 3 * * SUN", scheduledTime: new Date(Date.now() + 200 * 86_400_000) })],
  ];
}

async function wholeApp(runtime) {
  useRuntime(runtime);
  const replies = [];
  const { miniflare, pid, coldStart: cold } = await coldStart(workerOptions(config, { replies }), "/healthz");
  try {
    await seed(miniflare, config);
    const worker = await miniflare.getWorker("agent-memory");
    const ctx = { replies };
    const minted = await miniflare.dispatchFetch(`${BASE}/admin/tenants/${config.tenant}/memory-tokens`,
      json({ agent_type: "assistant", agent_id: "inst-1" }, { "cf-access-jwt-assertion": config.access }));
    ctx.token = (await minted.json()).token;
    const routes = {};
    for (const [name, build] of routeKinds(ctx)) {
      routes[name] = [];
      for (let i = 0; i < config.repeat; i++) {
        const request = build(i);
        routes[name].push(await measure(pid, async () => {
          if (!Array.isArray(request)) return (await worker.scheduled(request)).outcome;
          const response = await miniflare.dispatchFetch(`${BASE}${request[0]}`, request[1]);
          await response.arrayBuffer();
          return response.status;
        }));
      }
    }
    return { coldStart: cold, routes };
  } finally {
    await miniflare.dispose();
  }
}

async function bare(runtime) {
  useRuntime(runtime);
  const { miniflare, pid, coldStart: cold } = await coldStart(bareOptions(runtime), "/");
  try {
    const warm = [];
    for (let i = 0; i < config.repeat; i++) {
      warm.push(await measure(pid, async () => (await miniflare.dispatchFetch(`${BASE}/`)).status));
    }
    return { coldStart: cold, warm };
  } finally {
    await miniflare.dispose();
  }
}

const out = { app314: [], bare: { "3.13": [], "3.14": [] } };
for (let run = 0; run < config.runs; run++) {
  for (const version of ["3.13", "3.14"]) out.bare[version].push(await bare(config.runtimes[version]));
  out.app314.push(await wholeApp(config.runtimes["3.14"]));
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
