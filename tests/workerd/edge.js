// A second Worker in the same workerd: it builds a Request *inside* workerd and sends it to
// the Python Worker through a service binding, for what cannot arrive over HTTP from
// outside:
//   * a lower-case method (workerd's own HTTP server answers 501 before any Worker runs):
//     header x-tier-method: M  ->  new Request(url, {method: M});
//   * a Content-Length (Miniflare's entry Worker re-sends a dispatched body as a stream
//     without it): header x-tier-content-length: N  ->  content-length: N on the request;
//     with x-tier-stream the body is passed on as a stream as it arrives, else read first.
// And GET /__compat-flags answers workerd's own view of the flags its date turns on
// (`Cloudflare.compatibilityFlags`; this Worker has the Python Worker's date).
export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/__compat-flags") {
      return Response.json(globalThis.Cloudflare?.compatibilityFlags ?? null);
    }
    const method = request.headers.get("x-tier-method") ?? request.method;
    const headers = new Headers(request.headers);
    const declared = request.headers.get("x-tier-content-length");
    if (declared !== null) headers.set("content-length", declared);
    const init = { method, headers };
    if (request.headers.get("x-tier-stream") !== null) {
      init.body = request.body; // passed on as it arrives (it may never end)
      init.duplex = "half";
    } else if (!["GET", "HEAD"].includes(method.toUpperCase())) {
      init.body = await request.arrayBuffer();
    }
    let forwarded;
    try {
      forwarded = new Request(request.url, init);
    } catch (error) {
      return Response.json({ edgeError: String(error) }, { status: 599 });
    }
    const answer = await env.PYTHON.fetch(forwarded);
    return new Response(answer.body, {
      status: answer.status,
      headers: { ...Object.fromEntries(answer.headers), "x-tier-sent-method": forwarded.method },
    });
  },
};
