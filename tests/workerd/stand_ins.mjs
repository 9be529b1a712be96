// Workers AI and Vectorize for the real-workerd tier, the two bindings workerd has no local
// implementation of: Miniflare wrapped bindings (a JS object built inside the Worker's own
// isolate, as workerd builds a binding), so the SDK sees the class names workerd gives them
// (`Ai`, `VectorizeIndexImpl`) and wraps them as on Cloudflare. harness.mjs appends this file
// to tests/pyodide/models.mjs (a wrapped binding must be one module without imports): the
// classes, their documented input and output shapes and their errors are those models.
//
// Vectorize keeps its vectors per index for the isolate's life (the Worker and its Durable
// Objects share the isolate). A chat model's answer is whatever the checks scripted next:
// fetched from the harness through the `SCRIPT` service binding.

const indexes = new Map();

export function vectorize(env) {
  if (!indexes.has(env.INDEX)) indexes.set(env.INDEX, new VectorizeIndexImpl(env.DIMENSIONS));
  return indexes.get(env.INDEX);
}

export function ai(env) {
  const model = new Ai();
  const run = model.run.bind(model);
  // An own property, so the object stays an `Ai` for the SDK.
  model.run = async (name, inputs) => {
    if (CHAT_MODELS[name] !== undefined) {
      const scripted = await env.SCRIPT.fetch("http://script/next-reply");
      model.replyNext(await scripted.json());
    }
    return run(name, inputs);
  };
  return model;
}
