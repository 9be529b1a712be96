// Starts Miniflare (real workerd) with the bindings the contract tests need, and serves
// tests/miniflare/worker.js on a free loopback port:
//
//   KV     a KV namespace                       (env.KV)
//   DB     a D1 database                        (env.DB)
//   OBJECTS a SQLite-backed Durable Object class (SqlObject, new_sqlite_classes)
//   FEED   a Queue (feed) with a dead-letter queue (feed-dlq), both consumed by the Worker
//
// Protocol with the parent (tests/miniflare/conftest.py):
//   * one line on stdout once the server accepts requests:
//       {"ready": true, "port": <port>, "url": "...", "workerd": "<miniflare version>"}
//     nothing else is ever written to stdout; workerd's own output goes to stderr;
//   * on failure to start, {"ready": false, "error": "..."} on stdout and exit code 1;
//   * the harness stops (disposing Miniflare, which stops workerd and deletes its
//     temporary in-memory storage) when stdin closes, or on SIGTERM/SIGINT. The parent
//     keeps stdin open for the whole test session, so a parent that dies takes the
//     harness with it.
//
// Usage: node tests/miniflare/harness.mjs [--compatibility-date YYYY-MM-DD]
// No network: everything listens on 127.0.0.1 and storage is in memory.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Log, LogLevel, Miniflare } from "miniflare";

const here = dirname(fileURLToPath(import.meta.url));

function option(name, fallback) {
  const index = process.argv.indexOf(name);
  return index >= 0 && index + 1 < process.argv.length ? process.argv[index + 1] : fallback;
}

const compatibilityDate = option("--compatibility-date", "2026-04-21");

function announce(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

let miniflare;
let stopping = false;

async function stop(code) {
  if (stopping) return;
  stopping = true;
  try {
    await miniflare?.dispose();
  } finally {
    process.exit(code);
  }
}

process.on("SIGTERM", () => stop(0));
process.on("SIGINT", () => stop(0));
process.stdin.on("end", () => stop(0));
process.stdin.on("close", () => stop(0));
process.stdin.resume();

try {
  miniflare = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    modules: true,
    modulesRoot: here,
    scriptPath: join(here, "worker.js"),
    compatibilityDate,
    kvNamespaces: { KV: "contract-kv" },
    d1Databases: { DB: "contract-d1" },
    durableObjects: {
      OBJECTS: { className: "SqlObject", useSQLite: true },
      LOG: { className: "DeliveryLog" },
    },
    // The change feed's shape (wrangler.toml): a queue with a dead-letter queue, both
    // consumed by this Worker; batches leave at once, retries wait no longer than asked.
    queueProducers: { FEED: { queueName: "feed" } },
    queueConsumers: {
      feed: { maxBatchSize: 10, maxBatchTimeout: 0, maxRetries: 2, deadLetterQueue: "feed-dlq" },
      "feed-dlq": { maxBatchSize: 10, maxBatchTimeout: 0 },
    },
    // No `Request.cf` download from workers.cloudflare.com: the tests never use it.
    cf: false,
    // Persistence off (the default): in-memory storage, deleted on dispose.
    log: new Log(LogLevel.WARN),
    handleRuntimeStdio(stdout, stderr) {
      // Keep stdout for the ready line only.
      stdout.pipe(process.stderr);
      stderr.pipe(process.stderr);
    },
  });
  const url = await miniflare.ready;
  const pkg = JSON.parse(
    readFileSync(join(here, "..", "..", "node_modules", "miniflare", "package.json"), "utf8"),
  );
  announce({ ready: true, port: Number(url.port), url: url.href, miniflare: pkg.version });
} catch (error) {
  announce({ ready: false, error: String(error?.stack ?? error) });
  await stop(1);
}
