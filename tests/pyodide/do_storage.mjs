// A Durable Object's `ctx.storage` for Python in Pyodide, backed by a REAL SQLite-backed
// Durable Object in workerd (tests/miniflare/worker.js `SqlObject`).
//
// `ctx.storage.sql.exec` is synchronous on Cloudflare, but workerd lives in another
// process: each call is made synchronous here by handing it to a worker thread (which
// POSTs it to the harness Worker's `/do` route) and blocking on `Atomics.wait` until the
// answer is in a SharedArrayBuffer. The SQL, its errors, its value conversions (int64 as a
// double, BLOB as ArrayBuffer) and the DO's SQL authorizer are workerd's own, and so is what
// reading a cursor observes (`Cursor`, below).
//
// `transactionSync(fn)` cannot run `fn` inside workerd's transaction (fn is Python, here),
// so it replays like tests/miniflare/adapters.py: each statement `fn` runs is executed after
// all earlier ones inside a transaction that is rolled back (a probe), so `fn` sees the
// transaction's state; when `fn` returns, the log is run once more and committed; when it
// throws, nothing was ever committed.

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

/** The JS value a row cell from workerd stands for (see decodeCell). */
function decodeRow(row) {
  return row.map(decodeCell);
}

function rowObject(columnNames, row) {
  // workerd sets the columns in order, so a repeated name keeps its last value.
  return Object.fromEntries(columnNames.map((name, i) => [name, row[i]]));
}

/** workerd's `SqlStorage.Cursor` (its JS class is named `Cursor`; `raw()` gives a
 * `RawIterator`), observably as lazy as workerd's (src/workerd/api/sql.c++, util/sqlite.c++):
 *
 * - `exec` binds and steps the statement to its first row (`Query::init` -> `nextRow`): a
 *   write is done, and counted in `rowsWritten`, even if the cursor is never read; an error
 *   in that first step is thrown by `exec`;
 * - each advance (`next`, iteration, `raw()`, `toArray`, `one`) computes the next row, plus
 *   one row of look-ahead, so `rowsRead` grows as rows are read, and an error in a later row
 *   is thrown by the read that reaches it (the read before the failing row), not by `exec`;
 * - `one()` throws unless exactly one row remains.
 *
 * What each read observes is workerd's own: the object runs the statement and reads its real
 * cursor to the end in the same call, recording, read by read, the row or the error and the
 * counters after it (tests/miniflare/worker.js `readCursor`); this class replays those
 * observations as Python reads. Not modelled: a statement that runs between two reads of a
 * cursor does not change the rows read later (SQLite leaves that undefined for a table being
 * changed). A cursor cannot stay open in the object between calls: each call is an event of
 * its own, and workerd refuses to commit an event's writes while a statement is in progress
 * ("cannot commit transaction - SQL statements in progress: SQLITE_BUSY", an internal error
 * that resets the object; checked in workerd 1.20260426.1). The same holds on Cloudflare for
 * a cursor a Worker leaves unread when its writes commit. */
export class Cursor {
  #reads;
  #rowsRead;
  #rowsWritten;

  constructor(observed) {
    this.columnNames = observed.columnNames;
    this.#reads = observed.reads.slice();
    this.#rowsRead = observed.rowsRead;
    this.#rowsWritten = observed.rowsWritten;
  }

  // Getters, as in workerd: the statement's counters so far (final once it has ended).
  get rowsRead() {
    return this.#rowsRead;
  }

  get rowsWritten() {
    return this.#rowsWritten;
  }

  /** The next row as an array, or null when the cursor is done (done stays done). */
  #advance() {
    const read = this.#reads.shift();
    if (read === undefined) return null;
    this.#rowsRead = read.rowsRead;
    this.#rowsWritten = read.rowsWritten;
    if (read.error) {
      this.#reads = [];
      throwJs(read.error);
    }
    return decodeRow(read.row);
  }

  next() {
    const row = this.#advance();
    return row === null
      ? { done: true, value: undefined }
      : { done: false, value: rowObject(this.columnNames, row) };
  }

  toArray() {
    const rows = [];
    for (let row = this.#advance(); row !== null; row = this.#advance()) {
      rows.push(rowObject(this.columnNames, row));
    }
    return rows;
  }

  one() {
    // workerd: read one row; if the statement has not ended, end it and refuse.
    const row = this.#advance();
    if (row === null) throw new Error("Expected exactly one result from SQL query, but got no results.");
    if (this.#reads.length > 0) {
      this.#reads = [];
      throw new Error("Expected exactly one result from SQL query, but got multiple results.");
    }
    return rowObject(this.columnNames, row);
  }

  raw() {
    return new RawIterator(() => this.#advance());
  }

  [Symbol.iterator]() {
    return new RowIterator(() => this.next());
  }

  get [Symbol.toStringTag]() {
    return "Cursor";
  }
}

export class RawIterator {
  #advance;

  constructor(advance) {
    this.#advance = advance;
  }

  next() {
    const row = this.#advance();
    return row === null ? { done: true, value: undefined } : { done: false, value: row };
  }

  [Symbol.iterator]() {
    return this;
  }
}

export class RowIterator {
  #next;

  constructor(next) {
    this.#next = next;
  }

  next() {
    return this.#next();
  }

  [Symbol.iterator]() {
    return this;
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
      const answer = this._bridge.call({ name: this._name, op: "exec", sql: query, params, reads: true });
      if (answer.error) throwJs(answer.error);
      return new Cursor(answer.ok);
    }
    const statement = { sql: query, params, mayFail: false };
    const answer = this._bridge.call({
      name: this._name,
      op: "transaction",
      statements: [...this._log, statement],
      commit: false,
      reads: true,
    });
    if (answer.error) throwJs(answer.error);
    const outcome = answer.ok.outcomes[this._log.length];
    // A failing statement may be caught by the callback: replay it as "may fail".
    statement.mayFail = outcome === undefined || "error" in outcome;
    this._log.push(statement);
    if (outcome === undefined) throwJs(answer.ok.error);
    if ("error" in outcome) throwJs(outcome.error);
    return new Cursor(outcome.ok);
  }

  // The object's real deleteAll (workerd drops its SQLite database and alarm).
  async deleteAll() {
    const answer = this._bridge.call({ name: this._name, op: "deleteAll" });
    if (answer.error) throwJs(answer.error);
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
          reads: true,
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
