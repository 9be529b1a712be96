// The checks of the real-workerd tier (run by harness.mjs; one pytest item each, found by
// tests/workerd/conftest.py from the `check("<id>", ...)` lines below). Each check gets the
// running harness (`ctx`): `miniflare` (dispatchFetch reaches the Python Worker), `worker`
// and `edge` (Fetchers of the Python Worker and of edge.js), `env` (the same KV/D1/R2 seen
// from outside), `signals` (notes posted by background work and alarms), `config`.
// Checks run concurrently, so each uses its own tag, keys, tables and Durable Object names.

import assert from "node:assert/strict";

export const checks = [];

function check(id, run) {
  checks.push({ id, run });
}

// Not timed assertions: guards that turn a hang (the failure mode of several defects) into
// a failure with a message instead of a stuck session.
const HANG_GUARD_MS = 30_000;

function guard(promise, what, ms = HANG_GUARD_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const BASE = "https://agent-memory.example";
const MiB = 1024 * 1024;

async function fetchWorker(ctx, path, init = {}) {
  const response = await guard(ctx.miniflare.dispatchFetch(`${BASE}${path}`, init), path);
  const text = await response.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, headers: response.headers, text, body };
}

async function rpc(ctx, name, method, payload) {
  const answer = await fetchWorker(ctx, "/rpc", {
    method: "POST",
    body: JSON.stringify({ name, method, payload }),
  });
  assert.equal(answer.status, 200, `RPC ${method} failed: ${answer.text}`);
  return answer.body;
}

async function seen(ctx, tag) {
  return (await fetchWorker(ctx, `/seen?tag=${tag}`)).body.count;
}

function limitOf(ctx) {
  return Number(ctx.config.vars.MAX_BODY_BYTES);
}

/** A body stream of `total` bytes in 64 KiB chunks, sent chunked (no Content-Length); with
 * `stallAfter`, it stops after that many bytes and ends only when `release()` is called. */
function chunkedBody(total, { stallAfter } = {}) {
  let sent = 0;
  let release;
  const stalled = new Promise((resolve) => {
    release = resolve;
  });
  const stream = new ReadableStream({
    async pull(controller) {
      if (stallAfter !== undefined && sent >= stallAfter) {
        await stalled; // the client never finishes its body until released
        controller.close();
        return;
      }
      if (sent >= total) {
        controller.close();
        return;
      }
      const size = Math.min(64 * 1024, total - sent, (stallAfter ?? total) - sent);
      sent += size;
      controller.enqueue(new Uint8Array(size).fill(0x61));
    },
  });
  return { stream, release: () => release(), sent: () => sent };
}

function assertPayloadTooLarge(answer, limit) {
  assert.equal(answer.status, 413, answer.text);
  assert.equal(answer.headers.get("content-type"), "application/json");
  assert.equal(answer.body.error.code, "payload_too_large", answer.text);
  assert.match(answer.body.error.message, new RegExp(String(limit)));
}

// --- fetch dispatch -----------------------------------------------------------------------

check("methods_workerd_knows_reach_the_app_verbatim", async (ctx) => {
  for (const method of ["PROPFIND", "REPORT", "PUT"]) {
    const answer = await fetchWorker(ctx, `/echo?tag=method-${method}&q=%C3%A9`, { method });
    assert.equal(answer.status, 200, `${method}: ${answer.text}`);
    assert.equal(answer.body.method, method);
    assert.deepEqual(answer.body.query, { tag: `method-${method}`, q: "é" });
    assert.match(answer.body.python, /^3\.13\./, "the Worker runs Python 3.13");
  }
});

check("lower_case_and_unknown_methods_never_reach_the_worker_as_sent", async (ctx) => {
  // Over HTTP, workerd's own server refuses a method it cannot parse, lower-case ones
  // included (kj-http: 501 "Unrecognized request method"), before any Worker runs.
  for (const method of ["patch", "M-SEARCH"]) {
    const tag = `wire-${method}`;
    const wire = await fetchWorker(ctx, `/echo?tag=${tag}`, { method });
    assert.equal(wire.status, 501, `${method}: ${wire.text}`);
    assert.equal(await seen(ctx, tag), 0);
  }
  // Built inside workerd (a service binding from edge.js), `new Request(url, {method:
  // "patch"})` is upper-cased: compat flag upper_case_all_http_methods, default since
  // 2024-10-14 (workerd compatibility-date.capnp). The entry passes it on as is.
  const response = await guard(
    ctx.edge.fetch(`${BASE}/echo?tag=patch-edge`, {
      method: "POST",
      headers: { "x-tier-method": "patch", "x-tier-content-length": "2" },
      body: "{}",
    }),
    "edge patch",
  );
  const body = await response.json();
  assert.equal(response.status, 200, JSON.stringify(body));
  assert.equal(response.headers.get("x-tier-sent-method"), "PATCH");
  assert.equal(body.method, "PATCH");
  assert.equal(body.body_bytes, 2);
  assert.equal(body.content_length, "2");
});

check("a_204_is_sent_without_a_body", async (ctx) => {
  const answer = await fetchWorker(ctx, "/empty");
  assert.equal(answer.status, 204);
  assert.equal(answer.text, "");
});

check("a_declared_oversized_body_is_refused_before_it_is_read", async (ctx) => {
  // Through edge.js: Miniflare's own entry Worker re-sends a dispatched body as a stream
  // without Content-Length; edge.js sets it again. The client declares 2 MiB, sends 16 bytes
  // and stalls: the 413 can only come from the header, with the body unread.
  const limit = limitOf(ctx);
  const body = chunkedBody(Number.POSITIVE_INFINITY, { stallAfter: 16 });
  try {
    const response = await guard(
      ctx.edge.fetch(`${BASE}/echo?tag=declared`, {
        method: "POST",
        headers: { "x-tier-content-length": String(2 * MiB), "x-tier-stream": "1" },
        body: body.stream,
        duplex: "half",
      }),
      "declared body",
    );
    const text = await response.text();
    const answer = { status: response.status, headers: response.headers, text };
    assertPayloadTooLarge({ ...answer, body: JSON.parse(text) }, limit);
  } finally {
    body.release();
  }
  assert.equal(await seen(ctx, "declared"), 0);
});

check("a_chunked_oversized_body_is_refused", async (ctx) => {
  // Defect 5: without Content-Length the whole body used to be read and handed on.
  const limit = limitOf(ctx);
  const body = chunkedBody(2 * MiB);
  const answer = await fetchWorker(ctx, "/echo?tag=chunked", {
    method: "POST",
    body: body.stream,
    duplex: "half",
  });
  assertPayloadTooLarge(answer, limit);
  assert.equal(await seen(ctx, "chunked"), 0);
});

check("a_chunked_body_is_refused_as_soon_as_it_passes_the_limit", async (ctx) => {
  // The client sends limit + 1 bytes and then never ends its body: the 413 must come from
  // what was read so far, not after the end (which the old code awaited forever).
  const limit = limitOf(ctx);
  const body = chunkedBody(Number.POSITIVE_INFINITY, { stallAfter: limit + 1 });
  try {
    const answer = await fetchWorker(ctx, "/echo?tag=stalled", {
      method: "POST",
      body: body.stream,
      duplex: "half",
    });
    assertPayloadTooLarge(answer, limit);
  } finally {
    body.release();
  }
  assert.equal(await seen(ctx, "stalled"), 0);
});

check("a_chunked_body_within_the_limit_arrives_whole", async (ctx) => {
  const limit = limitOf(ctx);
  const answer = await fetchWorker(ctx, "/echo?tag=within", {
    method: "POST",
    body: chunkedBody(limit).stream,
    duplex: "half",
  });
  assert.equal(answer.status, 200, answer.text);
  assert.equal(answer.body.body_bytes, limit);
  assert.equal(answer.body.content_length, null, "sent chunked, without Content-Length");
});

// --- cron ---------------------------------------------------------------------------------

check("the_cron_string_and_time_reach_the_dispatcher", async (ctx) => {
  const cron = "0 3 * * SUN";
  assert.ok(ctx.config.crons.includes(cron), `wrangler.toml declares ${cron}`);
  const scheduledTime = new Date(Date.UTC(2026, 0, 4, 3, 0, 0)); // a Sunday, 03:00 UTC
  const result = await guard(ctx.worker.scheduled({ cron, scheduledTime }), "scheduled()");
  assert.equal(result.outcome, "ok", JSON.stringify(result));
  const record = JSON.parse(await ctx.env.KV.get("tier:cron"));
  assert.deepEqual(record, {
    cron,
    cron_type: "str",
    scheduled_time: scheduledTime.getTime() / 1000,
    scheduled_time_type: "float",
  });
});

// --- Durable Object RPC, storage, alarms ----------------------------------------------------

const s = (name) => name; // a leaf type name in a value_shapes.shape() tree
const dict = (items) => ({ dict: "dict", items });
const list = (items) => ["list", items];

check("rpc_payload_and_result_cross_the_sdk_with_nested_values_and_none", async (ctx) => {
  const payload = {
    tenant: "t1",
    none: null,
    n: 1,
    f: 2.5,
    text: "é ✓",
    list: [1, null, { deep: [true, "x"] }],
    object: { inner: { none: null }, empty: {} },
    empty_list: [],
  };
  const answer = await rpc(ctx, "rpc-echo", "echo", payload);
  const { result } = answer;
  assert.equal(result.initialized_first, true, "initialize ran behind blockConcurrencyWhile");
  assert.deepEqual(result.received, payload);
  assert.deepEqual(
    result.received_shape,
    dict({
      tenant: s("str"),
      none: s("NoneType"),
      n: s("int"),
      f: s("float"),
      text: s("str"),
      list: list([s("int"), s("NoneType"), dict({ deep: list([s("bool"), s("str")]) })]),
      object: dict({ inner: dict({ none: s("NoneType") }), empty: dict({}) }),
      empty_list: list([]),
    }),
  );
  const nested = {
    none: null,
    text: "é ✓",
    int: 7,
    float: 2.5,
    bool: true,
    list: [1, null, { deep: [false, "x"] }],
    object: { inner: { none: null, empty: {}, empty_list: [] } },
  };
  assert.deepEqual(result.nested, nested);
  // What the Worker's adapter handed the caller: plain dicts and lists, None for null.
  const nestedShape = answer.result_shape.items.nested;
  assert.deepEqual(
    nestedShape,
    dict({
      none: s("NoneType"),
      text: s("str"),
      int: s("int"),
      float: s("float"),
      bool: s("bool"),
      list: list([s("int"), s("NoneType"), dict({ deep: list([s("bool"), s("str")]) })]),
      object: dict({
        inner: dict({ none: s("NoneType"), empty: dict({}), empty_list: list([]) }),
      }),
    }),
  );
});

check("durable_object_database_size_is_live", async (ctx) => {
  // Defect 6: the SDK wrapper cached databaseSize at its first read.
  const { result } = await rpc(ctx, "database-size", "database_size", {});
  assert.ok(
    result.after >= result.before + 320 * 1024,
    `database_size before ${result.before}, after 320 KiB of inserts ${result.after}`,
  );
});

check("a_failed_alarm_is_retried_and_the_retry_shows_its_count", async (ctx) => {
  // Defect 4: workerd's AlarmInvocationInfo has getters; read as a dict it was always 0.
  const tag = "alarm-retry";
  await rpc(ctx, `alarm-${tag}`, "arm_alarm", { tag, fail_below: 1 });
  const first = await guard(ctx.signals.note(`alarm-${tag}`, 0), "the alarm");
  const retry = await guard(ctx.signals.note(`alarm-${tag}`, 1), "the alarm's retry");
  assert.deepEqual(first, { retry_count: 0, retry_count_type: "int", alarm_inside_handler: null });
  assert.deepEqual(retry, { retry_count: 1, retry_count_type: "int", alarm_inside_handler: null });
});

// --- waitUntil ------------------------------------------------------------------------------

async function backgroundRow(ctx, tag) {
  return await ctx.env.DB.prepare("SELECT source FROM tier_background WHERE tag = ?")
    .bind(tag)
    .first();
}

check("work_scheduled_from_the_worker_runs_after_the_response_and_lands_in_d1", async (ctx) => {
  const tag = "bg-worker";
  const answer = await fetchWorker(ctx, "/background", {
    method: "POST",
    body: JSON.stringify({ tag }),
  });
  assert.equal(answer.status, 202, answer.text);
  assert.deepEqual(await guard(ctx.signals.note(`background-${tag}`), "background work"), { tag });
  assert.deepEqual(await backgroundRow(ctx, tag), { source: "worker" });
});

check("work_scheduled_from_the_durable_object_runs_and_lands_in_d1", async (ctx) => {
  const tag = "bg-object";
  const { result } = await rpc(ctx, "background-object", "background", { tag });
  assert.deepEqual(result, { scheduled: tag });
  assert.deepEqual(await guard(ctx.signals.note(`background-${tag}`), "background work"), { tag });
  assert.deepEqual(await backgroundRow(ctx, tag), { source: "durable-object" });
});

// --- KV / D1 / R2 through the adapters --------------------------------------------------------

check("kv_d1_r2_round_trips_through_the_adapters_and_the_sdk_wrappers", async (ctx) => {
  const tag = "rt";
  const answer = await fetchWorker(ctx, "/adapters", {
    method: "POST",
    body: JSON.stringify({ tag }),
  });
  assert.equal(answer.status, 200, answer.text);
  assert.deepEqual(answer.body, {
    wrapped: { KV: true, DB: true, COLD: true },
    kv: {
      value: "é 1",
      metadata: { n: 1, none: null, list: [1, "x"] },
      missing: null,
      listed: [`${tag}:a`, `${tag}:b`],
      b_expires: true,
      after_delete: null,
    },
    d1: {
      changes: 1,
      rows: [
        { id: 1, note: "é", blob: "0001ff" },
        { id: 2, note: null, blob: null },
      ],
      batch_error: "D1Error",
      after_batch: 2,
    },
    r2: {
      size: 6,
      data: "00636f6c64ff",
      custom_metadata: { k: "v" },
      listed: [`${tag}/one.bin`],
      missing: null,
      after_delete: null,
    },
  });
  // The same data seen from outside the Worker, through Miniflare's own bindings.
  const kv = await ctx.env.KV.getWithMetadata(`${tag}:a`);
  assert.deepEqual([kv.value, kv.metadata], ["é 1", { n: 1, none: null, list: [1, "x"] }]);
  const object = await ctx.env.COLD.get(`${tag}/one.bin`);
  assert.deepEqual(Buffer.from(await object.arrayBuffer()).toString("hex"), "00636f6c64ff");
  assert.deepEqual(object.customMetadata, { k: "v" });
  const { results } = await ctx.env.DB.prepare(`SELECT note FROM t_${tag} ORDER BY id`).all();
  assert.deepEqual(results, [{ note: "é" }, { note: null }]);
});
