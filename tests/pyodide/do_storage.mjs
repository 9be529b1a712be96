// A Durable Object's `ctx.storage` for Python in Pyodide, backed by a REAL SQLite-backed
// Durable Object in workerd (tests/miniflare/worker.js `SqlObject`).
//
// `ctx.storage.sql.exec` is synchronous on Cloudflare, but workerd lives in another
// process: each call is made synchronous here by handing it to a worker thread (which
// POSTs it to the harness Worker's `/do` route) and blocking on `Atomics.wait` until the
// answer is in a SharedArrayBuffer. The SQL, its errors, its value conversions (int64 as a
// double, BLOB as ArrayBuffer) and the DO's SQL authorizer are workerd's own.
//
// `transactionSync(fn)` cannot run `fn` inside workerd's transaction (fn is Python, here),
// so it replays like tests/miniflare/adapters.py: each statement `fn` runs is executed after
// all earlier ones inside a transaction that is rolled back (a probe), so `fn` sees the
// transaction's state; when `fn` returns, the log is run once more and committed; when it
// throws, nothing was ever committed. (Only the cursor API the adapter uses is modelled.)

import { Worker } from "node:worker_threads";

const BRIDGE = `
const { parentPort, workerData } = require("node:worker_threads");
parentPort.on("message", async ({ body, shared }) => {
  const flag = new Int32Array(shared, 0, 2);
  let text;
  try {
    const response = await fetch(workerData.url + "do", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    text = await response.text();
  } catch (error) {
    text = JSON.stringify({ error: { name: "HarnessError", message: String(error) } });
  }
  const bytes = new TextEncoder().encode(text);
  const out = new Uint8Array(shared, 8);
  if (bytes.length > out.length) {
    text = JSON.stringify({ error: { name: "HarnessError", message: "answer too large" } });
    out.set(new TextEncoder().encode(text));
    flag[1] = new TextEncoder().encode(text).length;
  } else {
    out.set(bytes);
    flag[1] = bytes.length;
  }
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
});
`;

const ANSWER_BYTES = 16 * 1024 * 1024;

export class SyncBridge {
  constructor(url) {
    this.worker = new Worker(BRIDGE, { eval: true, workerData: { url } });
    this.worker.unref();
    this.shared = new SharedArrayBuffer(8 + ANSWER_BYTES);
  }

  call(body) {
    const flag = new Int32Array(this.shared, 0, 2);
    Atomics.store(flag, 0, 0);
    this.worker.postMessage({ body, shared: this.shared });
    Atomics.wait(flag, 0, 0);
    const text = new TextDecoder().decode(new Uint8Array(this.shared, 8, flag[1]).slice());
    return JSON.parse(text);
  }

  close() {
    return this.worker.terminate();
  }
}

function base64ToBytes(text) {
  return Uint8Array.from(Buffer.from(text, "base64"));
}

/** A Python-side JS value -> the JSON tags tests/miniflare/worker.js decodes. */
function encodeParam(value) {
  if (typeof value === "bigint") return { $bigint: value.toString() };
  if (typeof value === "number" && !Number.isFinite(value)) return { $number: String(value) };
  if (value instanceof ArrayBuffer) return { $bytes: Buffer.from(value).toString("base64") };
  if (ArrayBuffer.isView(value)) {
    return {
      $bytes: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64"),
    };
  }
  if (value === undefined) return null;
  if (value !== null && typeof value === "object") return { $object: value };
  return value;
}

/** A result cell from workerd (tagged JSON) -> the JS value workerd would hand Python. */
function decodeCell(value) {
  if (value !== null && typeof value === "object") {
    if ("$bytes" in value) return base64ToBytes(value.$bytes).buffer;
    if ("$number" in value) return Number(value.$number);
  }
  return value;
}

function throwJs(error) {
  const Kind = error.name === "TypeError" ? TypeError : Error;
  const thrown = new Kind(error.message);
  throw thrown;
}

export class SqlStorageCursor {
  constructor(result) {
    this.columnNames = result.columnNames;
    this._rows = result.rows.map((row) => row.map(decodeCell));
    this.rowsRead = result.rowsRead;
    this.rowsWritten = result.rowsWritten;
    this._next = 0;
  }

  _object(row) {
    return Object.fromEntries(this.columnNames.map((name, i) => [name, row[i]]));
  }

  toArray() {
    const rows = this._rows.slice(this._next).map((row) => this._object(row));
    this._next = this._rows.length;
    return rows;
  }

  one() {
    const rest = this._rows.slice(this._next);
    if (rest.length === 0) throw new Error("Expected exactly one result from SQL query, but got no results.");
    if (rest.length > 1) throw new Error("Expected exactly one result from SQL query, but got multiple results.");
    this._next = this._rows.length;
    return this._object(rest[0]);
  }

  *raw() {
    while (this._next < this._rows.length) yield this._rows[this._next++];
  }

  *[Symbol.iterator]() {
    while (this._next < this._rows.length) yield this._object(this._rows[this._next++]);
  }

  next() {
    if (this._next < this._rows.length) {
      return { done: false, value: this._object(this._rows[this._next++]) };
    }
    return { done: true, value: undefined };
  }
}

class SqlStorage {
  constructor(owner) {
    this._owner = owner;
  }

  exec(query, ...params) {
    return this._owner._exec(query, params.map(encodeParam));
  }

  get databaseSize() {
    const cursor = this._owner._exec("SELECT page_count * page_size AS size FROM pragma_page_count(), pragma_page_size()", []);
    return cursor.toArray()[0]?.size ?? 0;
  }
}

export class DurableObjectStorage {
  constructor(bridge, name) {
    this._bridge = bridge;
    this._name = name;
    this._log = null; // statements of the open transactionSync, if any
    this.sql = new SqlStorage(this);
    this.transactionSyncCallbacks = [];
  }

  _exec(query, params) {
    if (this._log === null) {
      const answer = this._bridge.call({ name: this._name, op: "exec", sql: query, params });
      if (answer.error) throwJs(answer.error);
      return new SqlStorageCursor(answer.ok);
    }
    const statement = { sql: query, params, mayFail: false };
    const answer = this._bridge.call({
      name: this._name,
      op: "transaction",
      statements: [...this._log, statement],
      commit: false,
    });
    if (answer.error) throwJs(answer.error);
    const outcome = answer.ok.outcomes[this._log.length];
    // A failing statement may be caught by the callback: replay it as "may fail".
    statement.mayFail = outcome === undefined || "error" in outcome;
    this._log.push(statement);
    if (outcome === undefined) throwJs(answer.ok.error);
    if ("error" in outcome) throwJs(outcome.error);
    return new SqlStorageCursor(outcome.ok);
  }

  transactionSync(callback) {
    // Kept so a test can check whether Python released the callback's proxy afterwards.
    this.transactionSyncCallbacks.push(callback);
    if (this._log !== null) return callback(); // nested: part of the outer transaction
    this._log = [];
    try {
      const result = callback();
      const log = this._log;
      this._log = null;
      if (log.length > 0) {
        const answer = this._bridge.call({
          name: this._name,
          op: "transaction",
          statements: log,
          commit: true,
        });
        if (answer.error) throwJs(answer.error);
        if (answer.ok.error) throwJs(answer.ok.error);
      }
      return result;
    } finally {
      this._log = null;
    }
  }
}
