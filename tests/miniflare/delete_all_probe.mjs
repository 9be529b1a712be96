// Proves on workerd's real Durable Object SQLite (Miniflare with storage persisted to a
// folder) what the subject erase relies on (issue 26): a DELETE leaves the row's bytes in
// the object's SQLite file (workerd has no secure_delete), and `storage.deleteAll()` leaves
// none of them — nor the alarm (compatibility date 2026-02-24 or later) — while the object
// keeps working on a new, empty database.
//
// And what the subject erase does to every other instance (issue 47): in an object whose
// table SQLite had to rebalance, rows overwritten with '0's and deleted still leave copies in
// the file, and `deleteAll()` followed at once (no await) by writing back the surviving rows
// leaves none, keeps the survivors (across a restart of workerd on the same folder), and they
// land in the deletion's commit.
//
// Usage: node tests/miniflare/delete_all_probe.mjs <persist-dir> <needle> <compatibility-date>
// Prints one JSON line: what each step observed. No network: loopback only.

import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Log, LogLevel, Miniflare } from "miniflare";

const [dir, needle, compatibilityDate] = process.argv.slice(2);

const script = `
import { DurableObject } from "cloudflare:workers";
export class Probe extends DurableObject {
  async fetch(request) {
    const step = new URL(request.url).pathname.slice(1);
    const sql = this.ctx.storage.sql;
    const text = request.headers.get("x-text");
    if (step === "write") {
      sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)");
      sql.exec("CREATE TABLE IF NOT EXISTS people (name TEXT PRIMARY KEY)");
      for (let i = 0; i < 20; i++) sql.exec("INSERT INTO notes (body) VALUES (?)", text + " note " + i);
      sql.exec("INSERT INTO people (name) VALUES (?)", text);
      await this.ctx.storage.setAlarm(Date.now() + 3_600_000);
    } else if (step === "delete") {
      sql.exec("DELETE FROM notes");
      sql.exec("DELETE FROM people");
    } else if (step === "deleteAll") {
      await this.ctx.storage.deleteAll();
    } else if (step === "fill") {
      sql.exec("CREATE TABLE IF NOT EXISTS log (seq INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT)");
      for (let i = 0; i < 60; i++) {
        const who = i % 3 === 0 ? text : "kept-row";
        sql.exec("INSERT INTO log (body) VALUES (?)", who + " " + "x".repeat(200) + " " + i);
      }
      await this.ctx.storage.setAlarm(Date.now() + 3_600_000);
    } else if (step === "erase") {
      // agent_runtime_do.storage._wipe_and_delete: overwrite the text in place, then delete.
      const size = "length(CAST(body AS BLOB))";
      sql.exec(\`UPDATE log SET body = substr(hex(zeroblob(\${size})), 1, \${size}) WHERE instr(body, ?)\`, text);
      sql.exec("DELETE FROM log WHERE body NOT LIKE 'kept-row%'");
    } else if (step === "checkpoint") {
      // About 1,200 pages of other writes: SQLite checkpoints its WAL into the file at 1,000.
      sql.exec("CREATE TABLE IF NOT EXISTS filler (body TEXT)");
      for (let i = 0; i < 1200; i++) sql.exec("INSERT INTO filler VALUES (?)", "f".repeat(4000));
    } else if (step === "rebuild") {
      // AgentRuntimeCore.rebuild through CloudflareDurableObjectStorage.replace_all.
      const alarm = await this.ctx.storage.getAlarm();
      const rows = sql.exec("SELECT * FROM log").toArray();
      const deleted = this.ctx.storage.deleteAll();
      const gone = this.ctx.storage.sql.exec("SELECT count(*) AS n FROM sqlite_master").one().n;
      const fresh = this.ctx.storage.sql;
      fresh.exec("CREATE TABLE log (seq INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT)");
      for (const row of rows) fresh.exec("INSERT INTO log (seq, body) VALUES (?, ?)", row.seq, row.body);
      await deleted;
      await this.ctx.storage.setAlarm(alarm);
      return Response.json({ schema_after_delete: gone, rows: rows.length });
    } else if (step === "reuse") {
      sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)");
      sql.exec("INSERT INTO notes (body) VALUES ('after')");
    }
    if (["count", "fill", "erase", "checkpoint"].includes(step)) {
      const n = sql.exec("SELECT count(*) AS n FROM log").one().n;
      return Response.json({ rows: n, alarm: await this.ctx.storage.getAlarm() });
    }
    const tables = sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf%' AND name NOT LIKE 'sqlite%'").toArray().map((r) => r.name);
    return Response.json({ tables, alarm: await this.ctx.storage.getAlarm() });
  }
  async alarm() {}
}
export default {
  fetch(request, env) {
    const name = request.headers.get("x-object") ?? "subject-object";
    return env.PROBE.get(env.PROBE.idFromName(name)).fetch(request);
  },
};`;

function filesHolding(root, text) {
  const found = [];
  const walk = (path) => {
    for (const name of readdirSync(path)) {
      const full = join(path, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (readFileSync(full).includes(Buffer.from(text))) found.push(full.slice(root.length + 1));
    }
  };
  walk(root);
  return found;
}

const start = () =>
  new Miniflare({
    host: "127.0.0.1",
    port: 0,
    modules: true,
    script,
    compatibilityDate,
    durableObjects: { PROBE: { className: "Probe", useSQLite: true } },
    durableObjectsPersist: dir,
    cf: false,
    log: new Log(LogLevel.WARN),
  });
const out = {};
let mf = start();
try {
  let url = await mf.ready;
  const step = async (name, object) =>
    (
      await fetch(new URL(name, url), {
        method: "POST",
        headers: { "x-text": needle, ...(object ? { "x-object": object } : {}) },
      })
    ).json();
  out.written = await step("write");
  out.files_after_write = filesHolding(dir, needle);
  out.deleted = await step("delete");
  out.files_after_delete = filesHolding(dir, needle);
  out.delete_all = await step("deleteAll");
  out.files_after_delete_all = filesHolding(dir, needle);
  out.reused = await step("reuse");
  out.files_after_reuse = filesHolding(dir, needle);
  // Another instance: rows of the subject among others, erased in place, then rebuilt.
  out.filled = await step("fill", "shared-object");
  out.erased = await step("erase", "shared-object");
  await step("checkpoint", "shared-object");
  out.files_after_erase = filesHolding(dir, needle);
  out.rebuilt = await step("rebuild", "shared-object");
  out.files_after_rebuild = filesHolding(dir, needle);
  out.kept_in_files_after_rebuild = filesHolding(dir, "kept-row").length > 0;
  await mf.dispose();
  mf = start();
  url = await mf.ready;
  out.after_restart = await step("count", "shared-object");
} catch (error) {
  out.error = String(error?.stack ?? error);
} finally {
  await mf.dispose();
}
out.files_after_dispose = filesHolding(dir, needle);
process.stdout.write(JSON.stringify(out) + "\n");
