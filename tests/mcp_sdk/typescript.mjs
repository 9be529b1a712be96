// The official TypeScript MCP SDKs from npm against a running server, many checks in one Node
// process: @modelcontextprotocol/sdk (the 1.x line) and @modelcontextprotocol/client (the v2
// client line), each with an API key and with its own OAuth client (DCR, and a client
// metadata document that lists port-less loopback redirects while this process listens on a
// port chosen at run time), a refresh with rotation, per protocol revision.
//
//   node tests/mcp_sdk/typescript.mjs '{"base": ..., "apiKey": ..., "access": ..., "document": ...}'
//
// `access` is a Cloudflare Access token for the consent page (the "browser" here fetches it,
// approves, and follows the 302 to this process's loopback callback). Prints one JSON line:
// {"results": [{"id", "outcome": "passed"|"failed", "message"}]}. Loopback only.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import * as v2 from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError as UnauthorizedV1 } from "@modelcontextprotocol/sdk/client/auth.js";

const config = JSON.parse(process.argv[2]);
const mcpUrl = new URL(`${config.base}/mcp`);

// The loopback callback the consent page redirects to, on a port the OS picks now.
const callbacks = [];
const callback = createServer((req, res) => {
  callbacks.push(new URL(req.url, "http://127.0.0.1"));
  res.end("callback received");
});
await new Promise((ready) => callback.listen(0, "127.0.0.1", ready));
const redirectUrl = `http://127.0.0.1:${callback.address().port}/callback`;

/** The person at the consent page: signed in through Access, approves every scope. */
async function consent(authorizationUrl) {
  const headers = { "cf-access-jwt-assertion": config.access };
  const page = await fetch(authorizationUrl, { headers });
  const html = await page.text();
  assert.equal(page.status, 200, html.slice(0, 300));
  const ticket = /name=ticket value='([^']+)'/.exec(html)[1];
  const form = new URLSearchParams({ ticket, tenant: /<option value='([^']+)'>/.exec(html)[1] });
  form.set("decision", "approve");
  for (const [, scope] of html.matchAll(/name='scope\.([^']+)'/g)) form.set(`scope.${scope}`, "on");
  const answer = await fetch(`${config.base}/authorize`, {
    method: "POST", headers, body: form, redirect: "manual",
  });
  assert.equal(answer.status, 302);
  const location = answer.headers.get("location");
  assert.ok(location.startsWith(redirectUrl), location);
  await fetch(location); // the browser lands on the client's loopback callback
  return { html, params: callbacks.at(-1).searchParams };
}

/** An in-memory OAuthClientProvider (both lines share the interface). */
class Provider {
  constructor(name, documentUrl) {
    this.name = name;
    this.clientMetadataUrl = documentUrl;
    this.saved = {};
    this.consents = [];
    this.tokenHistory = [];
  }
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return {
      client_name: this.name,
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() { return this.saved.client; }
  saveClientInformation(info) { this.saved.client = info; }
  tokens() { return this.saved.tokens; }
  saveTokens(tokens) { this.saved.tokens = tokens; this.tokenHistory.push(tokens); }
  saveCodeVerifier(verifier) { this.saved.verifier = verifier; }
  codeVerifier() { return this.saved.verifier; }
  async redirectToAuthorization(url) { this.consents.push(await consent(url)); }
}

/** Connect through an OAuth flow: the first connect meets the 401 and runs consent. */
async function oauthConnect(makeClient, makeTransport, provider, Unauthorized) {
  let transport = makeTransport(provider);
  let client = makeClient();
  try {
    await client.connect(transport);
    throw new Error("connected without authorization");
  } catch (error) {
    if (!(error instanceof Unauthorized)) throw error;
  }
  const { params } = provider.consents.at(-1);
  assert.equal(params.get("iss"), config.issuer ?? config.base); // RFC 9207
  // The v2 client takes the callback's parameters and checks `iss` itself (RFC 9207).
  await transport.finishAuth(Unauthorized === UnauthorizedV1 ? params.get("code") : params);
  transport = makeTransport(provider);
  client = makeClient();
  await client.connect(transport);
  return client;
}

/** tools/list with annotations, then store_memory and recall_memory: the text comes back. */
async function useMemory(client, label) {
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
  assert.deepEqual(Object.keys(byName).sort(), ["recall_memory", "store_memory"]);
  assert.equal(byName.recall_memory.annotations.readOnlyHint, true);
  assert.equal(byName.recall_memory.title, "Recall memory");
  const fact = `The ${label} deploy window opens on Tuesdays`;
  const stored = await client.callTool({ name: "store_memory", arguments: { content: fact } });
  assert.equal(stored.isError, false, JSON.stringify(stored));
  const recalled = await client.callTool({
    name: "recall_memory", arguments: { query: `${label} deploy window` },
  });
  assert.equal(recalled.isError, false);
  assert.ok(recalled.content[0].text.includes(fact), recalled.content[0].text);
}

/** Refresh with rotation: the access token is revoked (RFC 7009, its refresh token stays),
 *  the next call meets a 401, the SDK refreshes and retries; the refresh token rotated. */
async function refreshes(client, provider) {
  const before = provider.saved.tokens;
  const revoked = await fetch(`${config.base}/revoke`, {
    method: "POST",
    body: new URLSearchParams({ token: before.access_token, client_id: provider.saved.client.client_id }),
  });
  assert.equal(revoked.status, 200);
  await client.listTools({}, { cacheMode: "refresh" }).catch(() => client.listTools());
  const after = provider.saved.tokens;
  assert.notEqual(after.access_token, before.access_token);
  assert.notEqual(after.refresh_token, before.refresh_token);
  assert.equal(provider.consents.length, 1); // no second consent
}

const v1 = {
  client: () => new ClientV1({ name: "ts-sdk-1.x", version: "1.32.2" }),
  transport: (authProvider) => new TransportV1(mcpUrl, { authProvider }),
};
const v2Client = (options) => () => new v2.Client({ name: "ts-client-2.x", version: "2.4.0" }, options);
const v2Transport = (authProvider) => new v2.StreamableHTTPClientTransport(mcpUrl, { authProvider });
const MODES = {
  "2025-06-18": { supportedProtocolVersions: ["2025-06-18"] },
  "2025-11-25": {},
  "2026-07-28": { versionNegotiation: { mode: "auto" } },
};

async function versionOf(client) {
  return client.getNegotiatedProtocolVersion?.() ?? client.transport?.protocolVersion;
}

const checks = [];
const check = (id, run) => checks.push({ id, run });

check("sdk-1.x api key 2025-11-25", async () => {
  const client = v1.client();
  const headers = { authorization: `Bearer ${config.apiKey}` };
  await client.connect(new TransportV1(mcpUrl, { requestInit: { headers } }));
  assert.equal(client.transport.protocolVersion, "2025-11-25");
  await useMemory(client, "sdk-1 key");
  await client.close();
});
check("sdk-1.x oauth dcr 2025-11-25, refresh rotates", async () => {
  const provider = new Provider("ts-sdk-1.x dcr");
  const client = await oauthConnect(v1.client, v1.transport, provider, UnauthorizedV1);
  assert.match(provider.saved.client.client_id, /^amcl_/);
  await useMemory(client, "sdk-1 dcr");
  await refreshes(client, provider);
  await client.close();
});
check("sdk-1.x oauth client metadata document 2025-11-25", async () => {
  const provider = new Provider("ts-sdk-1.x cimd", config.document);
  const client = await oauthConnect(v1.client, v1.transport, provider, UnauthorizedV1);
  assert.equal(provider.saved.client.client_id, config.document);
  await useMemory(client, "sdk-1 cimd");
  await client.close();
});
for (const [version, options] of Object.entries(MODES)) {
  check(`client-2.x api key ${version}`, async () => {
    const client = v2Client(options)();
    const transport = new v2.StreamableHTTPClientTransport(mcpUrl, {
      authProvider: { token: async () => config.apiKey },
    });
    await client.connect(transport);
    assert.equal(await versionOf(client), version);
    await useMemory(client, `client-2 key ${version}`);
    await client.close();
  });
}
check("client-2.x oauth dcr 2026-07-28, refresh rotates", async () => {
  const provider = new Provider("ts-client-2.x dcr");
  const make = v2Client(MODES["2026-07-28"]);
  const client = await oauthConnect(make, v2Transport, provider, v2.UnauthorizedError);
  assert.equal(await versionOf(client), "2026-07-28");
  await useMemory(client, "client-2 dcr");
  await refreshes(client, provider);
  await client.close();
});
check("client-2.x oauth client metadata document 2025-06-18", async () => {
  const provider = new Provider("ts-client-2.x cimd", config.document);
  const make = v2Client(MODES["2025-06-18"]);
  const client = await oauthConnect(make, v2Transport, provider, v2.UnauthorizedError);
  assert.equal(await versionOf(client), "2025-06-18");
  assert.equal(provider.saved.client.client_id, config.document);
  await useMemory(client, "client-2 cimd");
  await client.close();
});

const results = [];
for (const { id, run } of checks) {
  try {
    await run();
    results.push({ id, outcome: "passed", message: "" });
  } catch (error) {
    results.push({ id, outcome: "failed", message: String(error?.stack ?? error).slice(0, 4000) });
  }
}
callback.close();
process.stdout.write(`${JSON.stringify({ results })}\n`);
