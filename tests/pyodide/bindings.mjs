// Miniflare's bindings dressed as workerd's, so that the workers SDK treats them as it treats
// the real ones.
//
// Miniflare#getBindings() hands Node a proxy per binding whose `constructor.name` is
// "constructor" (any property of the proxy answers). The workers SDK decides whether to wrap a
// binding by that name alone: `_EnvWrapper._BINDING_TYPES` (workers-runtime-sdk `rpc.py`) lists
// "KvNamespace", "D1Database", "R2Bucket", "Ratelimit", "Ai", "VectorizeIndexImpl", ... So
// without these classes the "wrapped" mode of the in-Pyodide tests handed the adapters the bare
// proxies, and the SDK's conversions (python_to_rpc / python_from_rpc) never ran.
//
// Each class below carries the name workerd's own binding object has (checked inside workerd
// 1.20260426.1 by printing `env.X.constructor.name` from a Worker: KvNamespace, D1Database,
// R2Bucket, Ratelimit) and forwards exactly the methods workerd's class has (workers-types
// `index.d.ts`), nothing else: an adapter that calls a method the real binding lacks fails
// here too. Arguments and results pass through unchanged; results are Miniflare's (plain
// objects, or its proxies for D1 statements and R2 objects).

function facade(name, methods) {
  const Binding = {
    [name]: class {
      #target;

      constructor(target) {
        this.#target = target;
      }

      static forward(instance, method, args) {
        return instance.#target[method](...args);
      }
    },
  }[name];
  for (const method of methods) {
    Object.defineProperty(Binding.prototype, method, {
      value: {
        [method](...args) {
          return Binding.forward(this, method, args);
        },
      }[method],
      writable: true,
      configurable: true,
    });
  }
  return Binding;
}

export const KvNamespace = facade("KvNamespace", [
  "get",
  "getWithMetadata",
  "put",
  "list",
  "delete",
]);
export const D1Database = facade("D1Database", [
  "prepare",
  "batch",
  "exec",
  "dump",
  "withSession",
]);
export const R2Bucket = facade("R2Bucket", [
  "head",
  "get",
  "put",
  "createMultipartUpload",
  "resumeMultipartUpload",
  "delete",
  "list",
]);
export const Ratelimit = facade("Ratelimit", ["limit"]);

/** The harness env: each Miniflare binding behind the class workerd gives it. */
export function workerdEnv(bindings) {
  return {
    KV: new KvNamespace(bindings.KV),
    DB: new D1Database(bindings.DB),
    COLD: new R2Bucket(bindings.COLD),
    EMBED_RATE_LIMITER: new Ratelimit(bindings.EMBED_RATE_LIMITER),
  };
}
