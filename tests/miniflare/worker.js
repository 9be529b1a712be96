// The Worker that tests/miniflare/harness.mjs runs inside workerd (through Miniflare).
//
// It exposes the real workerd bindings over HTTP so that test-only Python adapters
// (tests/miniflare/adapters.py) can drive them:
//
//   POST /kv  {op, key?, value?, options?}        -> env.KV (Workers KV)
//   POST /d1  {op, sql?, params?, column?, statements?}  -> env.DB (D1)
//   POST /do  {name, op, sql?, params?, statements?, commit?, reads?}  -> SqlObject `name`
//             (op: exec, transaction, deleteAll)
//             (reads: report what each read of the cursor observes, see readCursor)
//   POST /fetch {url, redirect}                    -> workerd's fetch: {status, location}
//   POST /queue {op: send, bodies, delaySeconds}   -> env.FEED.sendBatch (a Queue)
//   POST /queue {op: log, count}                   -> the consumer's log once it holds
//             `count` deliveries: [{queue, id, body, attempts, timestamp}] (waits for them)
//   The consumer (`queue()`, for queues feed and feed-dlq) retries a message of feed while
//   `body.fail` is at least its attempts so far, else acks it (feed-dlq's: always).
//
// Every answer is JSON: {ok: <result>} or {error: {name, message, stage?}}. Errors are
// returned, never thrown, so the Python side sees the exact JS error text.
//
// Values cross JSON faithfully: numbers are sent as JS gives them (JSON.stringify prints
// an integral double without a fraction, which is what lets Python apply Pyodide's own
// number rule); what JSON cannot carry is tagged:
//   {"$bytes": base64}   ArrayBuffer / typed array   (Python bytes, and back)
//   {"$bigint": "123"}   BigInt                       (Python int beyond 2^53)
//   {"$number": "NaN"}   NaN / Infinity / -Infinity   (Python float)
//   {"$object": {...}}   a plain JS object             (Python dict, sent as the SDK would)
// Tags appear in SQL parameters, SQL result cells and (Python -> JS only) KV metadata.

import { DurableObject } from "cloudflare:workers";

function bytesToBase64(bytes) {
  let binary = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}

function base64ToBytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** A JS value from workerd -> JSON-safe value (tags for what JSON cannot carry). */
function encode(value) {
  if (value === undefined || value === null) return null;
  if (typeof value === "number") {
    return Number.isFinite(value) ? value : { $number: String(value) };
  }
  if (typeof value === "bigint") return { $bigint: value.toString() };
  if (value instanceof ArrayBuffer) return { $bytes: bytesToBase64(new Uint8Array(value)) };
  if (ArrayBuffer.isView(value)) {
    return {
      $bytes: bytesToBase64(new Uint8Array(value.buffer, value.byteOffset, value.byteLength)),
    };
  }
  if (Array.isArray(value)) return value.map(encode);
  if (typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, encode(v)]));
  }
  return value;
}

/** A JSON parameter from Python -> the JS value the Python Workers SDK would pass. */
function decode(value) {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    if ("$bytes" in value) return base64ToBytes(value.$bytes);
    if ("$bigint" in value) return BigInt(value.$bigint);
    if ("$number" in value) return Number(value.$number);
    if ("$object" in value) {
      return Object.fromEntries(Object.entries(value.$object).map(([k, v]) => [k, decode(v)]));
    }
  }
  return value;
}

/** Like decode(), through arrays and objects (KV metadata as the SDK would build it). */
function decodeDeep(value) {
  const decoded = decode(value);
  if (decoded !== value) return decoded;
  if (Array.isArray(value)) return value.map(decodeDeep);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decodeDeep(v)]));
  }
  return value;
}

function errorInfo(error, stage) {
  const info = {
    name: error?.name ?? "Error",
    message: error?.message ?? String(error),
  };
  if (error?.cause?.message) info.cause = error.cause.message;
  if (stage) info.stage = stage;
  return info;
}

const json = (body) =>
  new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });

// --- KV -----------------------------------------------------------------------------------

async function kvOp(kv, body) {
  const { op, key, value, options } = body;
  switch (op) {
    case "get":
      return await kv.get(key);
    case "getWithMetadata": {
      const result = await kv.getWithMetadata(key);
      return { value: result.value, metadata: result.metadata };
    }
    case "put":
      if (options?.metadata !== undefined) options.metadata = decodeDeep(options.metadata);
      if (options && Object.keys(options).length > 0) await kv.put(key, value, options);
      else await kv.put(key, value);
      return null;
    case "delete":
      await kv.delete(key);
      return null;
    case "list":
      return await kv.list(options ?? {});
    case "clear": {
      // Test isolation: delete every key (one call instead of one per key from Python).
      let cursor;
      let deleted = 0;
      do {
        const page = await kv.list(cursor ? { cursor } : {});
        await Promise.all(page.keys.map((k) => kv.delete(k.name)));
        deleted += page.keys.length;
        cursor = page.list_complete ? undefined : page.cursor;
      } while (cursor);
      return deleted;
    }
    default:
      throw new Error(`harness: unknown KV op ${op}`);
  }
}

// --- D1 -----------------------------------------------------------------------------------

function d1Statement(db, sql, params) {
  // Prepare and bind separately so a failure says which step a Worker would see fail.
  let statement;
  try {
    statement = db.prepare(sql);
  } catch (error) {
    error.harnessStage = "prepare";
    throw error;
  }
  try {
    return statement.bind(...(params ?? []).map(decode));
  } catch (error) {
    error.harnessStage = "bind";
    throw error;
  }
}

async function d1Op(db, body) {
  const { op, sql, params, column, statements } = body;
  switch (op) {
    case "bind":
      d1Statement(db, sql, params);
      return null;
    case "all":
      return encode(await d1Statement(db, sql, params).all());
    case "run":
      return encode(await d1Statement(db, sql, params).run());
    case "first":
      return encode(
        column === undefined || column === null
          ? await d1Statement(db, sql, params).first()
          : await d1Statement(db, sql, params).first(column),
      );
    case "batch":
      return encode(await db.batch(statements.map((s) => d1Statement(db, s.sql, s.params))));
    case "reset": {
      // Test isolation: drop every user object, leaving an empty database.
      const objects = await db
        .prepare(
          "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') " +
            "AND substr(name, 1, 7) <> 'sqlite_' AND substr(name, 1, 4) <> '_cf_' " +
            "ORDER BY rowid",
        )
        .all();
      const virtual = objects.results
        .filter((o) => /^CREATE\s+VIRTUAL\s+TABLE/i.test(o.sql ?? ""))
        .map((o) => o.name);
      // A virtual table's shadow tables (FTS5's <name>_data, ...) go with it.
      const isShadow = (name) => virtual.some((v) => name.startsWith(`${v}_`));
      const quote = (name) => `"${name.replaceAll('"', '""')}"`;
      // Newest first (children before the tables they reference), in one batch with
      // foreign-key checks deferred to its end, when every table is gone.
      const drops = objects.results
        .filter((o) => !isShadow(o.name))
        .reverse()
        .map((o) => `DROP ${o.type === "view" ? "VIEW" : "TABLE"} ${quote(o.name)}`);
      if (drops.length > 0) {
        await db.batch([
          db.prepare("PRAGMA defer_foreign_keys = on"),
          ...drops.map((drop) => db.prepare(drop)),
        ]);
      }
      return drops.length;
    }
    default:
      throw new Error(`harness: unknown D1 op ${op}`);
  }
}

// --- Durable Object SQL --------------------------------------------------------------------

class ProbeRollback extends Error {}

function sqlRun(sql, query, params, reads) {
  const cursor = sql.exec(query, ...(params ?? []).map(decode));
  if (reads) return readCursor(cursor);
  const columnNames = cursor.columnNames;
  const rows = Array.from(cursor.raw(), (row) => row.map(encode));
  return { columnNames, rows, rowsRead: cursor.rowsRead, rowsWritten: cursor.rowsWritten };
}

// What JS observes while reading a workerd cursor to its end, read by read (for
// tests/pyodide/do_storage.mjs): the counters after exec(), then for each next() either the
// row and the counters after it, or the error that next() threw (workerd computes a row when
// the cursor is advanced, plus one row of look-ahead, so a failing row surfaces from the read
// before it). exec()'s own error (the first row) is thrown as usual.
function readCursor(cursor) {
  const counts = () => ({ rowsRead: cursor.rowsRead, rowsWritten: cursor.rowsWritten });
  const observed = { columnNames: cursor.columnNames, ...counts(), reads: [] };
  const rows = cursor.raw();
  for (;;) {
    let next;
    try {
      next = rows.next();
    } catch (error) {
      observed.reads.push({ error: errorInfo(error), ...counts() });
      return observed;
    }
    if (next.done) return observed;
    observed.reads.push({ row: next.value.map(encode), ...counts() });
  }
}

export class SqlObject extends DurableObject {
  async fetch(request) {
    const body = await request.json();
    const sql = this.ctx.storage.sql;
    try {
      switch (body.op) {
        case "exec":
          return json({ ok: sqlRun(sql, body.sql, body.params, body.reads) });
        case "transaction":
          return json({ ok: this.transaction(body.statements, body.commit, body.reads) });
        case "deleteAll":
          await this.ctx.storage.deleteAll();
          return json({ ok: null });
        default:
          throw new Error(`harness: unknown DO op ${body.op}`);
      }
    } catch (error) {
      return json({ error: errorInfo(error) });
    }
  }

  // Runs `statements` inside storage.transactionSync. Each statement either succeeds or,
  // when `mayFail` is set, may throw without aborting the transaction (a Python callback
  // that caught the error). The outcome of every statement is reported. With commit=false
  // the transaction is rolled back at the end (a "probe"): the Python adapter uses probes
  // to run a transaction_sync callback step by step and commits the log only when the
  // callback returns.
  transaction(statements, commit, reads) {
    const sql = this.ctx.storage.sql;
    const outcomes = [];
    try {
      this.ctx.storage.transactionSync(() => {
        for (const statement of statements) {
          try {
            outcomes.push({ ok: sqlRun(sql, statement.sql, statement.params, reads) });
          } catch (error) {
            if (!statement.mayFail) throw error;
            outcomes.push({ error: errorInfo(error) });
          }
        }
        if (!commit) throw new ProbeRollback();
      });
    } catch (error) {
      if (!(error instanceof ProbeRollback)) {
        return { outcomes, error: errorInfo(error), committed: false };
      }
    }
    return { outcomes, committed: Boolean(commit) };
  }
}

// --- entry -----------------------------------------------------------------------------------

// --- Queues --------------------------------------------------------------------------------

// The consumer's log lives in one Durable Object: a request waiting there for deliveries is
// woken by the consumer's own request to it (a Worker request cannot wait on another one).
export class DeliveryLog extends DurableObject {
  deliveries = [];
  waiters = [];

  async fetch(request) {
    const body = await request.json();
    if (body.op === "add") {
      this.deliveries.push(...body.entries);
      const ready = this.waiters.filter((w) => this.deliveries.length >= w.count);
      this.waiters = this.waiters.filter((w) => this.deliveries.length < w.count);
      for (const w of ready) w.resolve();
      return json({ ok: null });
    }
    if (this.deliveries.length < body.count) {
      await new Promise((resolve) => this.waiters.push({ count: body.count, resolve }));
    }
    return json({ ok: this.deliveries.splice(0, this.deliveries.length) });
  }
}

const deliveryLog = (env) => env.LOG.get(env.LOG.idFromName("log"));

async function queueOp(env, body) {
  if (body.op === "send") {
    const messages = body.bodies.map((b) => ({ body: b, contentType: "json" }));
    await env.FEED.sendBatch(messages, { delaySeconds: body.delaySeconds ?? 0 });
    return null;
  }
  if (body.op === "log") {
    const answer = await deliveryLog(env).fetch("http://log/", {
      method: "POST",
      body: JSON.stringify({ op: "wait", count: body.count }),
    });
    return (await answer.json()).ok;
  }
  throw new Error(`harness: unknown queue op ${body.op}`);
}

export default {
  async queue(batch, env) {
    const entries = batch.messages.map((message) => ({
      queue: batch.queue,
      id: message.id,
      body: message.body,
      attempts: message.attempts,
      timestamp: message.timestamp.getTime(),
    }));
    await deliveryLog(env).fetch("http://log/", {
      method: "POST",
      body: JSON.stringify({ op: "add", entries }),
    });
    for (const message of batch.messages) {
      const retry = batch.queue === "feed" && (message.body.fail ?? 0) >= message.attempts;
      if (retry) message.retry({ delaySeconds: 0 });
      else message.ack();
    }
  },

  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (request.method === "GET" && pathname === "/health") return json({ ok: true });
    if (request.method !== "POST") return new Response("POST only", { status: 405 });
    if (pathname === "/do") {
      const body = await request.clone().json();
      const stub = env.OBJECTS.get(env.OBJECTS.idFromName(body.name));
      return stub.fetch("http://do/", { method: "POST", body: JSON.stringify(body) });
    }
    const body = await request.json();
    if (pathname === "/fetch") {
      // workerd's own fetch, for tests/pyodide: what `redirect` does to a 3xx.
      try {
        const response = await fetch(body.url, { redirect: body.redirect });
        return json({
          ok: { status: response.status, location: response.headers.get("location") },
        });
      } catch (error) {
        return json({ error: errorInfo(error) });
      }
    }
    try {
      if (pathname === "/kv") return json({ ok: await kvOp(env.KV, body) });
      if (pathname === "/d1") return json({ ok: await d1Op(env.DB, body) });
      if (pathname === "/queue") return json({ ok: await queueOp(env, body) });
    } catch (error) {
      return json({ error: errorInfo(error, error?.harnessStage) });
    }
    return new Response("not found", { status: 404 });
  },
};
