// The checks of the real-workerd tier (run by harness.mjs in file order; one pytest item each,
// found by tests/workerd/conftest.py from the `check("<id>", ...)` lines below). Each gets the
// running harness (`ctx`): `miniflare` (dispatchFetch reaches the Worker), `worker` and `edge`
// (Fetchers of the Python Worker and of edge.js), `env` (the same KV/D1/R2 seen from outside),
// `replies` (the scripted chat answers), `upstream` (requests the tool upstream received),
// `config`. What several checks need (a memory token, a stored fact) is made once, on demand,
// so any subset of checks runs on its own.

import assert from "node:assert/strict";
import { createHash, createHmac, randomBytes } from "node:crypto";

export const checks = [];

function check(id, run) {
  checks.push({ id, run });
}

// Not timed assertions: guards that turn a hang into a failure with a message.
const HANG_GUARD_MS = 60_000;

function guard(promise, what, ms = HANG_GUARD_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const BASE = "https://agent-memory.example";
const MiB = 1024 * 1024;
const AGENT = "inst-1";

async function fetchWorker(ctx, path, init = {}) {
  const response = await guard(ctx.miniflare.dispatchFetch(`${BASE}${path}`, init), path);
  const text = await response.text();
  let body = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, headers: response.headers, text, body };
}

const json = (body, headers = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});
const bearer = (token) => ({ authorization: `Bearer ${token}` });
const access = (ctx) => ({ "cf-access-jwt-assertion": ctx.config.access });

function expect(answer, status) {
  assert.equal(answer.status, status, answer.text.slice(0, 2000));
  return answer.body;
}

/** Made once per session, whichever check asks first. */
function once(ctx, name, make) {
  ctx.made ??= {};
  ctx.made[name] ??= make();
  return ctx.made[name];
}

/** A memory token for agent AGENT of type "assistant", every tier, minted by the
 * Access-gated admin route. */
function memoryToken(ctx) {
  return once(ctx, "token", async () => {
    const body = { agent_type: "assistant", agent_id: AGENT };
    const minted = await fetchWorker(ctx, `/admin/tenants/${ctx.config.tenant}/memory-tokens`, json(body, access(ctx)));
    return expect(minted, 201).token;
  });
}

async function mcp(ctx, token, method, params, id = 1) {
  const answer = await fetchWorker(ctx, "/mcp", json({ jsonrpc: "2.0", id, method, params }, {
    ...bearer(token),
    accept: "application/json, text/event-stream",
  }));
  return expect(answer, 200);
}

// --- the runtime -----------------------------------------------------------------------------

check("flags_the_deployed_date_turns_on_are_on_here", async (ctx) => {
  // What turns on between the old date (2026-04-21) and the deployed one, read from workerd
  // itself (docs/pyodide.md "Compatibility flags"); python_workers_314 is the dev bundle's.
  const flags = await (await ctx.edge.fetch(`${BASE}/__compat-flags`)).json();
  for (const name of [
    "workflows_preserve_non_retryable_error_message",
    "diagnostics_channel_has_subscribers_getter",
    "python_process_pth_files",
    "throw_on_not_implemented_tls_options",
    "nodejs_compat",
    "nodejs_compat_v2",
    "workflows_enable_fast_engine_creation",
  ]) {
    assert.equal(flags[name], true, `${name} is off at ${ctx.config.compatibilityDate}`);
  }
});

check("health_reports_python_314_pydantic_and_every_binding", async (ctx) => {
  const health = expect(await fetchWorker(ctx, "/healthz"), 200);
  assert.deepEqual(health.bindings, {
    kv: true, d1: true, vectorize: true, ai_embedder: true, llm: true, agent_runtime: true, cold: true,
    feed: true,
  });
  assert.match(health.embedding.model, /^@cf\/baai\/bge-small-en-v1\.5/);
  // The runtime the deploy selects and the pydantic it uploads (docs/pyodide.md "Versions").
  assert.match(health.runtime.python, /^3\.14\./);
  assert.equal(health.runtime.pydantic, ctx.config.pydantic);
  const openapi = expect(await fetchWorker(ctx, "/openapi.json"), 200);
  assert.equal(openapi.openapi, "3.1.0");
});

// --- the entry: methods and bodies as workerd hands them over ------------------------------

check("methods_workerd_knows_reach_the_router_verbatim", async (ctx) => {
  for (const method of ["PROPFIND", "PUT"]) {
    const answer = await fetchWorker(ctx, "/healthz", { method });
    assert.equal(answer.status, 405, `${method}: ${answer.text}`);
    assert.equal(answer.headers.get("allow"), "GET");
  }
  // Over HTTP, workerd's own server answers 501 to a method it cannot parse (lower-case
  // included) before any Worker runs.
  assert.equal((await fetchWorker(ctx, "/healthz", { method: "patch" })).status, 501);
  // Built inside workerd, `new Request(url, {method: "patch"})` is upper-cased
  // (upper_case_all_http_methods, default since 2024-10-14): the router sees PATCH.
  const edge = await guard(
    ctx.edge.fetch(`${BASE}/healthz`, { headers: { "x-tier-method": "patch" } }),
    "edge patch",
  );
  assert.equal(edge.status, 405, await edge.text());
  assert.equal(edge.headers.get("x-tier-sent-method"), "PATCH");
});

/** A body stream of `total` bytes in 64 KiB chunks, sent chunked (no Content-Length); with
 * `stallAfter`, it stops after that many bytes and ends only when `release()` is called. */
function chunkedBody(total, { stallAfter, fill = 0x20 } = {}) {
  let sent = 0;
  let release;
  const stalled = new Promise((resolve) => {
    release = resolve;
  });
  const stream = new ReadableStream({
    async pull(controller) {
      if (stallAfter !== undefined && sent >= stallAfter) {
        await stalled;
        controller.close();
        return;
      }
      if (sent >= total) {
        controller.close();
        return;
      }
      const size = Math.min(64 * 1024, total - sent, (stallAfter ?? total) - sent);
      sent += size;
      controller.enqueue(new Uint8Array(size).fill(fill));
    },
  });
  return { stream, release: () => release() };
}

function assertPayloadTooLarge(answer, limit) {
  assert.equal(answer.status, 413, answer.text);
  assert.equal(answer.body.error.code, "payload_too_large", answer.text);
  assert.match(answer.body.error.message, new RegExp(String(limit)));
}

const limitOf = (ctx) => Number(ctx.config.vars.MAX_BODY_BYTES);

check("a_declared_oversized_body_is_refused_before_it_is_read", async (ctx) => {
  // Through edge.js (Miniflare's entry re-sends a dispatched body without Content-Length):
  // 2 MiB declared, 16 bytes sent, then a stall: only the header can answer.
  const body = chunkedBody(Number.POSITIVE_INFINITY, { stallAfter: 16 });
  try {
    const response = await guard(
      ctx.edge.fetch(`${BASE}/mcp`, {
        method: "POST",
        headers: { "x-tier-content-length": String(2 * MiB), "x-tier-stream": "1" },
        body: body.stream,
        duplex: "half",
      }),
      "declared body",
    );
    const text = await response.text();
    assertPayloadTooLarge({ status: response.status, text, body: JSON.parse(text) }, limitOf(ctx));
  } finally {
    body.release();
  }
});

check("a_chunked_body_is_refused_as_soon_as_it_passes_the_limit", async (ctx) => {
  // limit + 1 bytes and the body never ends: the 413 comes from what was read so far.
  const body = chunkedBody(Number.POSITIVE_INFINITY, { stallAfter: limitOf(ctx) + 1 });
  try {
    const answer = await fetchWorker(ctx, "/mcp", { method: "POST", body: body.stream, duplex: "half" });
    assertPayloadTooLarge(answer, limitOf(ctx));
  } finally {
    body.release();
  }
});

check("a_chunked_body_within_the_limit_arrives_whole", async (ctx) => {
  // Exactly MAX_BODY_BYTES, chunked: a JSON-RPC call padded with spaces, so MCP can answer
  // it only if every byte arrived.
  const call = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: {} });
  const head = new TextEncoder().encode(call);
  const pad = chunkedBody(limitOf(ctx) - head.length).stream.getReader();
  const stream = new ReadableStream({
    start(controller) {
      controller.enqueue(head);
    },
    async pull(controller) {
      const { done, value } = await pad.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
  });
  const answer = await fetchWorker(ctx, "/mcp", {
    method: "POST",
    headers: { ...bearer(ctx.config.apiKey), "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: stream,
    duplex: "half",
  });
  assert.equal(expect(answer, 200).id, 7);
});

// --- the tool gateway ------------------------------------------------------------------------

check("a_tool_call_goes_out_through_workerds_fetch_and_comes_back", async (ctx) => {
  const answer = await fetchWorker(ctx, "/api/v1/tools/echo", json({ text: "héllo" }, bearer(ctx.config.apiKey)));
  assert.deepEqual(expect(answer, 200), { echoed: { text: "héllo" } });
  assert.equal(answer.headers.get("x-upstream-status"), "200");
  const sent = ctx.upstream.at(-1);
  assert.deepEqual([sent.method, sent.url, JSON.parse(sent.body)], ["POST", ctx.config.upstream, { text: "héllo" }]);
  assert.equal(sent.headers.authorization, undefined, "the caller's API key never reaches the upstream");
  const bad = await fetchWorker(ctx, "/api/v1/tools/echo", json({ text: 3 }, bearer(ctx.config.apiKey)));
  assert.equal(bad.status, 422, bad.text);
});

check("mcp_stores_and_recalls_a_memory", async (ctx) => {
  const key = ctx.config.apiKey;
  const listed = await mcp(ctx, key, "tools/list", {});
  const names = listed.result.tools.map((t) => t.name);
  assert.ok(["echo", "recall_memory", "store_memory"].every((n) => names.includes(n)), names.join());
  const content = "The staging database listens on port 5433";
  const stored = await mcp(ctx, key, "tools/call", { name: "store_memory", arguments: { content } }, 2);
  assert.notEqual(stored.result.isError, true, JSON.stringify(stored));
  const recalled = await mcp(ctx, key, "tools/call", { name: "recall_memory", arguments: { query: "staging database port" } }, 3);
  assert.notEqual(recalled.result.isError, true, JSON.stringify(recalled));
  assert.match(JSON.stringify(recalled.result), /port 5433/);
});

// --- identity: Cloudflare Access and memory tokens ---------------------------------------------

check("an_access_gated_admin_route_needs_a_valid_access_token", async (ctx) => {
  const path = `/admin/tenants/${ctx.config.tenant}/memory-tokens`;
  const body = { agent_type: "assistant", agent_id: AGENT };
  assert.equal((await fetchWorker(ctx, path, json(body))).body.error.code, "access_token_missing");
  const forged = `${ctx.config.access.slice(0, -8)}AAAAAAAA`;
  const refused = await fetchWorker(ctx, path, json(body, { "cf-access-jwt-assertion": forged }));
  assert.equal(refused.status, 403, refused.text);
  assert.ok(await memoryToken(ctx), "the real token is accepted and a memory token minted");
});

// --- the memory API on every tier -----------------------------------------------------------

const memoryPath = (query = "") => `/api/v1/memory/${AGENT}${query}`;

async function write(ctx, item) {
  return fetchWorker(ctx, memoryPath(), json(item, bearer(await memoryToken(ctx))));
}

async function read(ctx, query) {
  return fetchWorker(ctx, memoryPath(query), { headers: bearer(await memoryToken(ctx)) });
}

check("working_memory_is_written_and_read_back", async (ctx) => {
  const item = { tier: "working", key: "plan", value: { step: 1, note: "in workerd" } };
  expect(await write(ctx, item), 201);
  const page = expect(await read(ctx, "?tier=working"), 200);
  assert.deepEqual(page.items.map((i) => [i.key, i.value]), [["plan", item.value]]);
  // The same entry from outside, in real KV.
  const { keys } = await ctx.env.KV.list();
  assert.ok(keys.some((k) => k.name.includes("plan")), JSON.stringify(keys));
});

check("an_invalid_write_is_a_422_from_pydantic_and_changes_nothing", async (ctx) => {
  const answer = await write(ctx, { tier: "working", key: 12, value: null, bogus: true });
  const problems = expect(answer, 422).error.details.problems.map((p) => p.field).sort();
  assert.deepEqual(problems, ["bogus", "key", "value"]);
});

function episodicWritten(ctx) {
  return once(ctx, "episode", async () => {
    const item = { tier: "episodic", key: "call-1", value: "Called Ada about the renewal" };
    return expect(await write(ctx, item), 201);
  });
}

check("episodic_memory_is_written_to_d1_and_read_back", async (ctx) => {
  await episodicWritten(ctx);
  const page = expect(await read(ctx, "?tier=episodic"), 200);
  assert.ok(page.items.some((i) => JSON.stringify(i.value).includes("renewal")), JSON.stringify(page));
  const { results } = await ctx.env.DB.prepare("SELECT count(*) AS n FROM memory_episodes").all();
  assert.ok(results[0].n >= 1);
});

check("semantic_memory_is_embedded_indexed_and_searched", async (ctx) => {
  const fact = { tier: "semantic", key: "site:example", value: "example.com login uses SSO" };
  expect(await write(ctx, fact), 201);
  const page = expect(await read(ctx, "?tier=semantic&query=how%20do%20I%20log%20in%20to%20example.com"), 200);
  assert.ok(page.items.some((i) => JSON.stringify(i.value).includes("SSO")), JSON.stringify(page));
  // Searching every tier the token may use ranks across them.
  const all = expect(await read(ctx, "?query=example.com%20SSO"), 200);
  assert.ok(all.tiers_searched.includes("semantic"), JSON.stringify(all));
});

check("the_procedural_tier_is_read_from_the_durable_object", async (ctx) => {
  const page = expect(await read(ctx, "?tier=procedural&agent_type=assistant"), 200);
  const ids = page.items.map((i) => i.key).sort();
  assert.deepEqual(ids, ["assistant.general.direct", "assistant.general.plan_first"]);
});

// --- OAuth for MCP clients -------------------------------------------------------------------

check("oauth_metadata_and_an_authorization_code_exchange", async (ctx) => {
  const metadata = expect(await fetchWorker(ctx, "/.well-known/oauth-authorization-server"), 200);
  assert.deepEqual(metadata.code_challenge_methods_supported, ["S256"]);
  const redirect = "http://127.0.0.1:33418/callback";
  const client = expect(await fetchWorker(ctx, "/register", json({
    client_name: "Tier client",
    redirect_uris: [redirect],
    token_endpoint_auth_method: "none",
    grant_types: ["authorization_code", "refresh_token"],
  })), 201);
  const verifier = randomBytes(48).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const resource = `${BASE}/mcp`;
  const query = new URLSearchParams({
    response_type: "code", client_id: client.client_id, redirect_uri: redirect, state: "st-1",
    code_challenge: challenge, code_challenge_method: "S256", resource,
  });
  const page = await fetchWorker(ctx, `/authorize?${query}`, { headers: access(ctx) });
  assert.equal(page.status, 200, page.text);
  const ticket = /name=ticket value='([^']+)'/.exec(page.text)[1].replaceAll("&#x27;", "'").replaceAll("&amp;", "&");
  const form = new URLSearchParams({ ticket, tenant: ctx.config.tenant, decision: "approve" });
  for (const [, scope] of page.text.matchAll(/name='scope\.([^']+)'/g)) form.set(`scope.${scope}`, "on");
  const decided = await fetchWorker(ctx, "/authorize", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...access(ctx) },
    body: form.toString(),
    redirect: "manual",
  });
  assert.equal(decided.status, 302, decided.text);
  const back = new URL(decided.headers.get("location"));
  assert.equal(back.searchParams.get("state"), "st-1");
  const exchanged = await fetchWorker(ctx, "/token", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code", code: back.searchParams.get("code"), redirect_uri: redirect,
      code_verifier: verifier, client_id: client.client_id, resource,
    }).toString(),
  });
  const tokens = expect(exchanged, 200);
  assert.equal(tokens.token_type.toLowerCase(), "bearer");
  const listed = await mcp(ctx, tokens.access_token, "tools/list", {});
  assert.ok(listed.result.tools.some((t) => t.name === "echo"));
});

// --- the agent runtime: a turn through the Durable Object ----------------------------------

check("an_agent_turn_runs_in_the_durable_object_with_a_scripted_model", async (ctx) => {
  const run = (input) => fetchWorker(ctx, `/v1/agents/${ctx.config.tenant}/assistant/run`, json({ input, instance_id: AGENT }, access(ctx)));
  ctx.replies.push(
    { toolCalls: [{ name: "working_memory_set", arguments: { key: "door", value: "blue" } }] },
    { text: "Noted: the door is blue." },
  );
  const first = expect(await run("Remember that the door is blue."), 200);
  assert.equal(first.status, "completed", JSON.stringify(first));
  assert.deepEqual([first.tool_calls, first.output], [1, "Noted: the door is blue."]);
  assert.ok(first.workflow_id.startsWith("assistant.general."), "Thompson sampling chose a workflow");
  // The run as stored: its log, and its outcome episode (written through waitUntil).
  const detail = expect(await fetchWorker(ctx, `/admin/agents/${ctx.config.tenant}/runs/${first.run_id}`, { headers: access(ctx) }), 200);
  assert.match(JSON.stringify(detail), /working_memory_set/);
  // The next turn sees the first one's episode in its context.
  ctx.replies.push({ text: "It is blue." });
  const second = expect(await run("What colour is the door?"), 200);
  assert.ok(second.context_episode_ids.includes(first.episode_id), JSON.stringify(second));
  assert.equal(second.turn_count, 2);
});

// --- cron ------------------------------------------------------------------------------------

check("the_weekly_cron_prunes_old_episodes_into_r2", async (ctx) => {
  const cron = "0 3 * * SUN";
  assert.ok(ctx.config.crons.includes(cron), `wrangler.toml declares ${cron}`);
  await episodicWritten(ctx);
  // Far enough ahead that every episode written so far is past EPISODE_RETENTION_DAYS.
  const days = Number(ctx.config.vars.EPISODE_RETENTION_DAYS) + 30;
  const scheduledTime = new Date(Date.now() + days * 86_400_000);
  const result = await guard(ctx.worker.scheduled({ cron, scheduledTime }), "scheduled()");
  assert.equal(result.outcome, "ok", JSON.stringify(result));
  const archived = await ctx.env.COLD.list({ prefix: "archive/" });
  assert.ok(archived.objects.length >= 1, "the pruned episodes went to R2");
  const { results } = await ctx.env.DB.prepare("SELECT count(*) AS n FROM memory_episodes WHERE tenant_id = ?")
    .bind(ctx.config.tenant)
    .all();
  assert.equal(results[0].n, 0, "and left D1");
  // The cold tier through the memory API.
  const page = expect(await read(ctx, "/archive"), 200);
  assert.ok(JSON.stringify(page).includes("renewal"), JSON.stringify(page).slice(0, 2000));
});

// --- the change feed: workerd's Queues, the consumer, WebCrypto's HMAC -----------------------

check("a_write_is_delivered_to_a_webhook_through_the_queue_signed", async (ctx) => {
  const path = `/admin/tenants/${ctx.config.tenant}/webhooks`;
  const { secret } = expect(await fetchWorker(ctx, path, json({ url: ctx.config.hooks }, access(ctx))), 201);
  const arrived = new Promise((resolve) => { ctx.webhooks.arrived = resolve; });
  const fact = { tier: "semantic", key: "feed:check", value: "the feed runs on workerd queues" };
  const written = expect(await write(ctx, fact), 201);
  // Published after the response, fanned out by the queue's consumer (this Worker's queue()),
  // then posted through workerd's fetch: wait for the endpoint to be called.
  await guard(arrived, "the webhook delivery");
  const [{ body, headers }] = ctx.webhooks.splice(0);
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signed = `${headers["webhook-id"]}.${headers["webhook-timestamp"]}.${body}`;
  const mac = createHmac("sha256", key).update(signed).digest("base64");
  assert.equal(headers["webhook-signature"], `v1,${mac}`);
  const change = JSON.parse(body);
  assert.equal(change.type, "memory.written");
  assert.equal(change.data.id, written.item.metadata.fact_id);
  assert.equal(change.id, headers["webhook-id"]);
  const hooks = expect(await fetchWorker(ctx, path, { headers: access(ctx) }), 200);
  assert.equal(hooks.deliveries[0].status, "delivered", JSON.stringify(hooks.deliveries));
});
