// The v2 client line in a browser page (bundled by esbuild for tests/oauth/test_typescript_sdks.py):
// connect to another origin's /mcp with an API key, so every POST is preceded by a CORS
// preflight (the Authorization header is not CORS-safelisted), list tools, store and recall.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

window.useMemory = async (base, key) => {
  const client = new Client({ name: "browser", version: "2.4.0" }, { versionNegotiation: { mode: "auto" } });
  const authProvider = { token: async () => key };
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider }));
  const { tools } = await client.listTools();
  const fact = "The browser's deploy window opens on Fridays";
  await client.callTool({ name: "store_memory", arguments: { content: fact } });
  const recalled = await client.callTool({ name: "recall_memory", arguments: { query: "browser deploy window" } });
  const version = client.getNegotiatedProtocolVersion();
  await client.close();
  return {
    version,
    tools: tools.map((tool) => tool.name).sort(),
    recalled: recalled.content[0].text.includes(fact),
  };
};
