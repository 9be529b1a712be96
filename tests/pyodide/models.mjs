// JS models, written in JavaScript, of what Miniflare cannot serve to Node: the
// ExecutionContext and DurableObjectState (with its alarm) a Python Worker receives, the
// Workers AI and Vectorize bindings, and the workerd-side helpers the workers SDK imports
// (`_pyodide_entrypoint_helper`, `_cloudflare_compat_flags`).
//
// They follow the documented shapes and workerd's behaviour where it matters to Python:
//
// * `waitUntil(p)` converts its argument to a promise the way workerd does (a jsg::Promise
//   from any thenable: `Promise.resolve(p)`), which calls `p.then` in a LATER microtask.
//   Pyodide destroys the borrowed proxy it made for a Python argument when the JS call
//   returns, so a coroutine handed over directly is already destroyed by then.
// * Only an ExecutionContext is patched to accept Python awaitables: workerd's
//   `patchWaitUntil` (src/pyodide/python-entrypoint-helper.ts) returns early unless
//   `Object.prototype.toString.call(ctx) === "[object ExecutionContext]"`, and the patched
//   function copies the proxy synchronously, awaits it, then destroys the copy. The SDK
//   calls patchWaitUntil for every class's first constructor argument, a Durable Object's
//   state included; the tag check is what leaves DurableObjectState unpatched.

/** Promises handed to waitUntil, so a test can wait for "the invocation's background
 * work" as the runtime would before ending the invocation. */
class WaitUntilLog {
  constructor() {
    this.pending = [];
    this.errors = [];
  }

  add(value) {
    // workerd: `waitUntil(kj::Promise<void>)` from JS converts the argument with
    // Promise.resolve semantics; `then` is called in a later microtask.
    const promise = Promise.resolve(value).catch((error) => {
      this.errors.push(String(error?.message ?? error));
    });
    this.pending.push(promise);
  }

  /** Settle everything scheduled so far (and what that schedules), like the end of an
   * invocation. Resolves to the error messages of rejected work. */
  async drain() {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0);
      await Promise.all(batch);
    }
    return this.errors.splice(0);
  }
}

export class ExecutionContext {
  constructor() {
    this._log = new WaitUntilLog();
  }

  get [Symbol.toStringTag]() {
    return "ExecutionContext";
  }

  waitUntil(value) {
    this._log.add(value);
  }

  passThroughOnException() {}

  drain() {
    return this._log.drain();
  }
}

/** What workerd hands an alarm handler (`alarm(alarmInfo)`): an instance of its class
 * `AlarmInvocationInfo`, not a plain object. Printed from a JS Durable Object's alarm in
 * workerd 1.20260426.1: constructor "AlarmInvocationInfo", tag "[object AlarmInvocationInfo]",
 * own properties `scheduledTime`, `retryCount`, `isRetry` (0/false on the first try, 1/true on
 * the retry after a throw). Pyodide's `to_py` converts only plain objects, so it leaves this a
 * JsProxy: reading it as a dict sees no retry at all. A plain object here hid exactly that. */
export class AlarmInvocationInfo {
  constructor(scheduledTime, retryCount) {
    this.scheduledTime = scheduledTime;
    this.retryCount = retryCount;
    this.isRetry = retryCount > 0;
  }
}

/** The alarm of one Durable Object, installed on its `ctx.storage` as `getAlarm`,
 * `setAlarm` and `deleteAlarm`, and delivered to the object's `alarm()` handler by
 * `deliver` (what the runtime does when the time comes). Documented behaviour relied on
 * (cloudflare-docs src/content/docs/durable-objects/api/alarms.mdx and the partial
 * src/content/partials/durable-objects/api-storage-alarms.mdx):
 *
 * - one alarm per object; `setAlarm(Date | number)` (integer ms since the epoch) replaces
 *   it and returns a Promise; a time at or before now is due at once;
 * - `getAlarm()` resolves to the time in ms, or null: "The alarm is considered to be set if
 *   it has not started, or if it has failed and any retry has not begun", so while the
 *   handler runs it is null unless the handler set a new one;
 * - `deleteAlarm()` unsets it (it does not cancel a running handler);
 * - the handler gets `alarmInfo`, an `AlarmInvocationInfo` (`scheduledTime`, `retryCount`,
 *   `isRetry`, as workerd gives them); when it throws it is retried
 *   with exponential backoff, "starting at 2 second delays for up to 6 retries".
 *
 * Not modelled: the options arguments (allowConcurrency, allowUnconfirmed), delays of up
 * to a minute during failover, and the runtime's own clock (`deliver` takes "now"). */
export class AlarmModel {
  constructor() {
    this.scheduled = null;
    this.retryCount = 0;
    this.running = false;
    this.setWhileRunning = false;
  }

  install(storage) {
    storage.getAlarm = async (_options) => this.scheduled;
    storage.setAlarm = async (scheduledTime, _options) => {
      const ms = scheduledTime instanceof Date ? scheduledTime.getTime() : scheduledTime;
      if (typeof ms !== "number" || !Number.isFinite(ms)) {
        throw new TypeError("setAlarm() requires a Date or a number of milliseconds");
      }
      this.scheduled = ms;
      this.retryCount = 0;
      if (this.running) this.setWhileRunning = true;
    };
    storage.deleteAlarm = async (_options) => {
      this.scheduled = null;
    };
    return storage;
  }

  /** Run `handler(alarmInfo)` if the alarm is due at `nowMs`: {ran, retryCount, error?}. */
  async deliver(handler, nowMs) {
    if (this.scheduled === null || this.scheduled > nowMs) return { ran: false };
    const retryCount = this.retryCount;
    const scheduledTime = this.scheduled;
    this.scheduled = null; // started: no longer "set"
    this.running = true;
    this.setWhileRunning = false;
    try {
      await handler(new AlarmInvocationInfo(scheduledTime, retryCount));
      return { ran: true, retryCount };
    } catch (error) {
      if (!this.setWhileRunning && retryCount < 6) {
        this.scheduled = nowMs + 2000 * 2 ** retryCount;
        this.retryCount = retryCount + 1;
      }
      return { ran: true, retryCount, error: String(error?.message ?? error) };
    } finally {
      this.running = false;
    }
  }
}

export class DurableObjectState {
  constructor(storage) {
    this._log = new WaitUntilLog();
    this.alarms = new AlarmModel();
    this.storage = this.alarms.install(storage);
    this.id = { toString: () => "model-object-id", name: "model" };
  }

  /** The runtime's side of an alarm: deliver it to `handler` if due at `nowMs`. */
  deliverAlarm(handler, nowMs) {
    return this.alarms.deliver(handler, nowMs);
  }

  get [Symbol.toStringTag]() {
    return "DurableObjectState";
  }

  waitUntil(value) {
    this._log.add(value);
  }

  async blockConcurrencyWhile(callback) {
    return await callback();
  }

  drain() {
    return this._log.drain();
  }
}

/** workerd's patchWaitUntil, reimplemented from its source (see the header comment). */
const waitUntilPatched = new WeakSet();
export function patchWaitUntil(ctx) {
  let tag;
  try {
    tag = Object.prototype.toString.call(ctx);
  } catch (_error) {}
  if (tag !== "[object ExecutionContext]" || waitUntilPatched.has(ctx)) return;
  const original = ctx.waitUntil.bind(ctx);
  ctx.waitUntil = (p) => {
    original(
      (async () => {
        if (p && typeof p === "object" && "copy" in p) p = p.copy();
        await p;
        if (p && typeof p === "object" && "destroy" in p) p.destroy();
      })(),
    );
  };
  waitUntilPatched.add(ctx);
}

export const entrypointHelper = {
  patchWaitUntil,
  cloudflareWorkersModule: {},
  cloudflareSocketsModule: {},
  doAnImport(name) {
    throw new Error(`JavaScript module imports are not modelled in the harness: ${name}`);
  },
  patch_env_helper() {
    throw new Error("patch_env is not modelled in the harness");
  },
};

// Compatibility flags the SDK reads, as the project's compatibility date sets them (workerd's
// compatibility-date.capnp: headers keep their commas from 2026-02-17; implicit Workflow
// dependencies are implied by python_workers from 2026-02-25).
export const compatFlags = {
  python_workflows_implicit_dependencies: true,
  python_request_headers_preserve_commas: true,
};

// --- Workers AI ---------------------------------------------------------------------------

const BGE_DIMENSIONS = {
  "@cf/baai/bge-small-en-v1.5": 384,
  "@cf/baai/bge-base-en-v1.5": 768,
  "@cf/baai/bge-large-en-v1.5": 1024,
};

// Text-generation models and the shape of their answer (cloudflare-docs
// src/content/workers-ai-models/<name>.json, "schema.output"):
// * "traditional": `{response: string, tool_calls?: [{name, arguments: object}], usage?}`
//   (llama-3.1-8b-instruct's schema has no `usage`; llama-3.3-70b-instruct-fp8-fast's has);
// * "openai": an OpenAI chat completion, `{id, object, created, model, choices: [{index,
//   message: {role, content: string|null, tool_calls?: [{id, type: "function", function:
//   {name, arguments: JSON string}}]}, finish_reason, logprobs}], usage}` (glm-4.7-flash).
const CHAT_MODELS = {
  "@cf/meta/llama-3.1-8b-instruct": { shape: "traditional", usage: false },
  "@cf/meta/llama-3.3-70b-instruct-fp8-fast": { shape: "traditional", usage: true },
  "@cf/zai-org/glm-4.7-flash": { shape: "openai", usage: true },
};

// The reranker (cloudflare-docs workers-ai/models/bge-reranker-base): input `{query,
// top_k?, contexts: [{text}]}` (query and each text: strings, min length 1; top_k an
// integer >= 1), output `{response: [{id, score}]}`, `id` the context's index, best first,
// at most top_k entries. The score here counts the query's words in the text.
const RERANKER = "@cf/baai/bge-reranker-base";

function rerank(inputs) {
  if (!isObject(inputs)) throw invalid("must be object", "");
  requireString(inputs, "query", "");
  if (inputs.query.length === 0) throw invalid("must NOT have fewer than 1 characters", "/query");
  if (!Array.isArray(inputs.contexts)) throw invalid("required properties are 'contexts'", "");
  if (inputs.top_k !== undefined && !(Number.isInteger(inputs.top_k) && inputs.top_k >= 1)) {
    throw invalid("must be integer >= 1", "/top_k");
  }
  const asked = new Set(inputs.query.toLowerCase().split(/\W+/).filter(Boolean));
  const response = inputs.contexts.map((context, id) => {
    if (!isObject(context) || typeof context.text !== "string" || context.text.length === 0) {
      throw invalid("must NOT have fewer than 1 characters", `/contexts/${id}/text`);
    }
    const found = context.text.toLowerCase().split(/\W+/).filter((w) => asked.has(w));
    return { id, score: 1 / (1 + Math.exp(2 - new Set(found).size)) };
  });
  response.sort((a, b) => b.score - a.score || a.id - b.id);
  return { response: response.slice(0, inputs.top_k ?? response.length) };
}

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const invalid = (what, at) => new Error(`5006: Error: ${what} at '${at}'`);

function requireString(object, key, at) {
  if (!(key in object)) throw invalid(`required properties are '${key}'`, at);
  if (typeof object[key] !== "string") throw invalid("must be string", `${at}/${key}`);
}

/** A tool parameters object as both schemas describe it: `{type, properties}` required. */
function checkParameters(parameters, at) {
  if (!isObject(parameters)) throw invalid("must be object", at);
  requireString(parameters, "type", at);
  if (!isObject(parameters.properties)) throw invalid("required properties are 'properties'", at);
}

/** The input schema of a "traditional" model (llama-3.x): `messages` of `{role, content}`
 * (both required strings; other keys allowed), `tools` each either `{name, description,
 * parameters}` or `{type, function: {name, description, parameters}}`. */
function checkTraditionalInput(inputs) {
  if (!Array.isArray(inputs.messages)) throw invalid("required properties are 'messages'", "");
  inputs.messages.forEach((message, i) => {
    if (!isObject(message)) throw invalid("must be object", `/messages/${i}`);
    requireString(message, "role", `/messages/${i}`);
    requireString(message, "content", `/messages/${i}`);
  });
  for (const [i, tool] of (inputs.tools ?? []).entries()) {
    const at = `/tools/${i}`;
    if (!isObject(tool)) throw invalid("must be object", at);
    const spec = "function" in tool ? tool.function : tool;
    if ("function" in tool) requireString(tool, "type", at);
    if (!isObject(spec)) throw invalid("must be object", `${at}/function`);
    requireString(spec, "name", at);
    requireString(spec, "description", at);
    checkParameters(spec.parameters, `${at}/parameters`);
  }
}

/** The input schema of an OpenAI-shaped model (glm-4.7-flash): messages by role (a `tool`
 * message needs `content` and `tool_call_id`; an assistant's `tool_calls` need `id`, `type`
 * and `function: {name, arguments: string}`), `tools` only as `{type: "function", function:
 * {name, ...}}`. */
function checkOpenAIInput(inputs) {
  if (!Array.isArray(inputs.messages) || inputs.messages.length === 0) {
    throw invalid("required properties are 'messages'", "");
  }
  inputs.messages.forEach((message, i) => {
    const at = `/messages/${i}`;
    if (!isObject(message)) throw invalid("must be object", at);
    requireString(message, "role", at);
    if (message.role === "tool") {
      requireString(message, "content", at);
      requireString(message, "tool_call_id", at);
    } else if (message.role === "assistant") {
      if (message.content !== undefined && message.content !== null) {
        requireString(message, "content", at);
      }
      for (const [j, call] of (message.tool_calls ?? []).entries()) {
        requireString(call, "id", `${at}/tool_calls/${j}`);
        if (call.type !== "function") throw invalid("must be equal to one of the allowed values", `${at}/tool_calls/${j}/type`);
        requireString(call.function ?? {}, "name", `${at}/tool_calls/${j}/function`);
        requireString(call.function ?? {}, "arguments", `${at}/tool_calls/${j}/function`);
      }
    } else {
      requireString(message, "content", at);
    }
  });
  for (const [i, tool] of (inputs.tools ?? []).entries()) {
    const at = `/tools/${i}`;
    if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) {
      throw invalid("required properties are 'type', 'function'", at);
    }
    requireString(tool.function, "name", `${at}/function`);
  }
}

const words = (text) => (typeof text === "string" ? text.split(/\s+/).filter(Boolean).length : 0);

/** `env.AI` (the binding's class in workerd is `Ai`) for the bge embedding models and some
 * text-generation models.
 *
 * Embeddings (docs: workers-ai-models/bge-*.json): input `{text: string | string[], pooling?}`,
 * at most 100 texts, each non-empty; output `{shape: [n, dims], data: number[][], pooling}`.
 * The vectors are deterministic from the text (not semantically meaningful).
 *
 * Chat (CHAT_MODELS): the input is checked against the model's documented schema (refused as
 * "5006: Error: ..."); the answer is the one a test scripted with `replyNext({text,
 * toolCalls})`, written in the model's documented output shape. The adapters' conversions are
 * what is tested, not the model. */
export class Ai {
  constructor() {
    this.calls = [];
    this.failures = [];
    this.chatReplies = [];
    this.replyPooling = null; // a test may make the reply name another pooling
  }

  /** The next run() rejects with this message (Workers AI's errors are "<code>: text"). */
  failNext(message) {
    this.failures.push(message);
  }

  /** What the next chat run() answers: `{text?, toolCalls?: [{name, arguments}]}`, or
   * `{raw}` for an answer sent exactly as given. */
  replyNext(reply) {
    this.chatReplies.push(reply);
  }

  async run(model, inputs) {
    if (this.failures.length > 0) throw new Error(this.failures.shift());
    // Only plain objects and arrays serialise like this: a Map or a PyProxy would not.
    this.calls.push({ model, inputs: JSON.parse(JSON.stringify(inputs)) });
    const chat = CHAT_MODELS[model];
    if (chat !== undefined) return this.#chat(model, chat, inputs);
    if (model === RERANKER) return rerank(inputs);
    const dims = BGE_DIMENSIONS[model];
    if (dims === undefined) throw new Error(`5007: No such model ${model} or task`);
    const texts = typeof inputs?.text === "string" ? [inputs.text] : inputs?.text;
    if (!Array.isArray(texts) || texts.length === 0 || texts.length > 100) {
      throw new Error("5006: Error: required properties at '/' are 'text'");
    }
    for (const text of texts) {
      if (typeof text !== "string" || text.length === 0) {
        // The schema's `minLength: 1` on every text.
        throw new Error("5006: Error: must NOT have fewer than 1 characters at '/text/0'");
      }
    }
    const pooling = inputs.pooling ?? "mean";
    const data = texts.map((text) => {
      const row = new Array(dims).fill(0);
      for (let i = 0; i < text.length; i++) row[(text.charCodeAt(i) * 31 + i) % dims] += 1;
      row[0] += 0.5; // never all-zero
      return row;
    });
    return { shape: [texts.length, dims], data, pooling: this.replyPooling ?? pooling };
  }

  #chat(model, chat, inputs) {
    if (!isObject(inputs)) throw invalid("must be object", "");
    if (chat.shape === "openai") checkOpenAIInput(inputs);
    else checkTraditionalInput(inputs);
    if (inputs.max_tokens !== undefined && !Number.isInteger(inputs.max_tokens)) {
      throw invalid("must be integer", "/max_tokens");
    }
    const reply = this.chatReplies.shift();
    if (reply === undefined) throw new Error("harness: no chat reply was scripted (replyNext)");
    if ("raw" in reply) return reply.raw;
    const text = reply.text ?? "";
    const calls = reply.toolCalls ?? [];
    const promptTokens = inputs.messages.reduce((n, m) => n + words(m.content), 0);
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: words(text) + calls.length,
      total_tokens: promptTokens + words(text) + calls.length,
    };
    const n = this.calls.length;
    if (chat.shape === "openai") {
      const message = { role: "assistant", content: calls.length > 0 && !text ? null : text };
      if (calls.length > 0) {
        message.tool_calls = calls.map((call, i) => ({
          id: `chatcmpl-tool-${n}${i}`,
          type: "function",
          function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) },
        }));
      }
      return {
        id: `chatcmpl-${n}`,
        object: "chat.completion",
        created: 1750000000 + n,
        model,
        choices: [
          {
            index: 0,
            message,
            finish_reason: calls.length > 0 ? "tool_calls" : "stop",
            logprobs: null,
          },
        ],
        usage,
      };
    }
    const answer = { response: text };
    if (calls.length > 0) {
      answer.tool_calls = calls.map((call) => ({ name: call.name, arguments: call.arguments ?? {} }));
    }
    if (chat.usage) answer.usage = usage;
    return answer;
  }
}

// --- Vectorize ------------------------------------------------------------------------------

/** `env.VECTORIZE` (docs: vectorize/reference/client-api.mdx): upsert/insert return
 * `{mutationId}`; query returns `{count, matches: [{id, score, values?, metadata?,
 * namespace?}]}`; getByIds returns the vectors; describe returns `{dimensions,
 * vectorCount, ...}`. Cosine scores; only implicit-$eq and $in filters are modelled. */
export class VectorizeIndexImpl {
  constructor(dimensions) {
    this.dimensions = dimensions;
    this.vectors = new Map();
    this.mutations = 0;
  }

  _write(vectors, replace) {
    let count = 0;
    for (const v of vectors) {
      if (!Array.isArray(v.values) && !ArrayBuffer.isView(v.values)) {
        throw new TypeError("VECTOR_INSERT_ERROR (code = 40008): values must be an array");
      }
      if (v.values.length !== this.dimensions) {
        throw new Error(
          `VECTOR_INSERT_ERROR (code = 40012): invalid vector for id="${v.id}", expected ` +
            `${this.dimensions} dimensions, and got ${v.values.length} dimensions`,
        );
      }
      if (!replace && this.vectors.has(v.id)) continue;
      this.vectors.set(v.id, {
        id: v.id,
        values: Array.from(v.values),
        metadata: v.metadata ?? {},
        namespace: v.namespace ?? null,
      });
      count++;
    }
    this.mutations++;
    return { mutationId: `mutation-${this.mutations}`, count };
  }

  async upsert(vectors) {
    return this._write(vectors, true);
  }

  async insert(vectors) {
    return this._write(vectors, false);
  }

  async query(vector, options = {}) {
    const values = Array.from(vector);
    const norm = (a) => Math.sqrt(a.reduce((s, x) => s + x * x, 0));
    const matches = [];
    for (const v of this.vectors.values()) {
      if (options.namespace !== undefined && options.namespace !== v.namespace) continue;
      if (!matchesFilter(v.metadata, options.filter)) continue;
      const dot = v.values.reduce((s, x, i) => s + x * values[i], 0);
      const match = { id: v.id, score: dot / (norm(v.values) * norm(values) || 1) };
      if (v.namespace !== null) match.namespace = v.namespace;
      if (options.returnValues) match.values = v.values;
      if (options.returnMetadata && options.returnMetadata !== "none") match.metadata = v.metadata;
      matches.push(match);
    }
    matches.sort((a, b) => b.score - a.score);
    const top = matches.slice(0, options.topK ?? 5);
    return { count: top.length, matches: top };
  }

  async getByIds(ids) {
    return ids.filter((id) => this.vectors.has(id)).map((id) => this.vectors.get(id));
  }

  async deleteByIds(ids) {
    let count = 0;
    for (const id of ids) if (this.vectors.delete(id)) count++;
    this.mutations++;
    return { mutationId: `mutation-${this.mutations}`, count };
  }

  async describe() {
    return {
      dimensions: this.dimensions,
      vectorCount: this.vectors.size,
      processedUpToMutation: String(this.mutations),
    };
  }
}

const OPERATORS = {
  $eq: (v, x) => v === x,
  $ne: (v, x) => v !== x,
  $in: (v, x) => x.includes(v),
  $nin: (v, x) => !x.includes(v),
  $lt: (v, x) => v !== undefined && v < x,
  $lte: (v, x) => v !== undefined && v <= x,
  $gt: (v, x) => v !== undefined && v > x,
  $gte: (v, x) => v !== undefined && v >= x,
};

// docs: vectorize/reference/metadata-filtering.mdx (implicit $eq, the operators above).
function matchesFilter(metadata, filter) {
  if (!filter) return true;
  return Object.entries(filter).every(([key, condition]) => {
    const value = metadata?.[key];
    if (condition !== null && typeof condition === "object" && !Array.isArray(condition)) {
      return Object.entries(condition).every(([op, operand]) => {
        const test = OPERATORS[op];
        if (test === undefined) throw new Error(`VECTOR_QUERY_ERROR (code = 40003): bad operator ${op}`);
        return test(value, operand);
      });
    }
    return value === condition;
  });
}
