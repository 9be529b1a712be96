// Runs entry.py in real workerd and prints what Durable Object RPC did to each value, as JSON
// (the content of observed.json). Needs the offline Python runtime (../shared/workerd-python,
// workerd 1.20260426.1) and the workers SDK from the project's venv; from the repository root:
//
//   MINIFLARE_WORKERD_PATH=../shared/workerd-python/workerd \
//     node tests/agents/rpc_probe/run.mjs > tests/agents/rpc_probe/observed.json

import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..");
const sdk = readdirSync(join(root, ".venv", "lib"))
  .map((python) => join(root, ".venv", "lib", python, "site-packages", "workers"))
  .find((path) => statSync(path, { throwIfNoEntry: false })?.isDirectory());

const modules = ["entry.py", "cases.py"].map((name) => ({
  type: "PythonModule",
  path: join(here, name),
  contents: readFileSync(join(here, name), "utf8"),
}));
// The SDK as pywrangler vendors it: python_modules/workers/*.
for (const name of readdirSync(sdk)) {
  if (!name.endsWith(".py")) continue;
  modules.push({
    type: "PythonModule",
    path: join(here, "python_modules", "workers", name),
    contents: readFileSync(join(sdk, name), "utf8"),
  });
}

const miniflare = new Miniflare({
  modulesRoot: here,
  modules,
  compatibilityDate: "2026-04-21",
  compatibilityFlags: ["python_workers"],
  durableObjects: { PROBE: { className: "Probe", useSQLite: true } },
});
try {
  const response = await miniflare.dispatchFetch("http://probe/");
  process.stdout.write(await response.text());
} finally {
  await miniflare.dispose();
}
