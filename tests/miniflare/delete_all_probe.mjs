// Proves on workerd's real Durable Object SQLite (Miniflare with storage persisted to a
// folder) what the subject erase relies on (issue 26): a DELETE leaves the row's bytes in
// the object's SQLite file (workerd has no secure_delete), and `storage.deleteAll()` leaves
// none of them — nor the alarm (compatibility date 2026-02-24 or later) — while the object
// keeps working on a new, empty database.
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
    } else if (step === "reuse") {
      sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)");
      sql.exec("INSERT INTO notes (body) VALUES ('after')");
    }
    const tables = sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '_cf%' AND name NOT LIKE 'sqlite%'").toArray().map((r) => r.name);
    return Response.json({ tables, alarm: await this.ctx.storage.getAlarm() });
  }
  async alarm() {}
}
export default {
  fetch(request, env) {
    return env.PROBE.get(env.PROBE.idFromName("subject-object")).fetch(request);
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

const mf = new Miniflare({
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
try {
  const url = await mf.ready;
  const step = async (name) =>
    (await fetch(new URL(name, url), { method: "POST", headers: { "x-text": needle } })).json();
  out.written = await step("write");
  out.files_after_write = filesHolding(dir, needle);
  out.deleted = await step("delete");
  out.files_after_delete = filesHolding(dir, needle);
  out.delete_all = await step("deleteAll");
  out.files_after_delete_all = filesHolding(dir, needle);
  out.reused = await step("reuse");
  out.files_after_reuse = filesHolding(dir, needle);
} catch (error) {
  out.error = String(error?.stack ?? error);
} finally {
  await mf.dispose();
}
out.files_after_dispose = filesHolding(dir, needle);
process.stdout.write(JSON.stringify(out) + "\n");
