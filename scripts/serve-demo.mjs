#!/usr/bin/env node
/**
 * Serves the built demo (page, its worker, tokenizers) on http://localhost:$PORT (default 5173),
 * and relays requests to its API from curl and servers to an open tab (scripts/relay.mjs).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { demoHeadersWith } from "./demo-headers.mjs";
import { createRelay } from "./relay.mjs";
import { startStaticServer } from "./static-server.mjs";

const root = resolve(fileURLToPath(import.meta.url), "../..");
for (const required of ["dist/demo/index.html", "dist/demo/sw.js"]) {
  if (!existsSync(resolve(root, required))) {
    console.error(`${required} is missing: run 'npm start', which builds it first.`);
    process.exit(1);
  }
}
const port = Number(process.env.PORT ?? 5173);
// The origins a deployment's ?config= makes the worker fetch (upstreams and file hosts off this
// machine), for the page's connect-src: space-separated, each a scheme, host and optional port.
const connect = (process.env.DEMO_CONNECT_SRC ?? "").split(/\s+/).filter(Boolean);
const notOrigin = connect.find((source) => !/^https?:\/\/[A-Za-z0-9.*-]+(:(\d+|\*))?$/.test(source));
if (notOrigin !== undefined) {
  console.error(
    `DEMO_CONNECT_SRC: '${notOrigin}' is not an origin. Give each as a scheme, a host and an optional port, e.g. https://llm.example:8000.`,
  );
  process.exit(1);
}
const server = await startStaticServer([{ prefix: "/", directory: resolve(root, "dist/demo") }], {
  port,
  extend: (origin) => createRelay({ origin, log: (line) => console.log(line) }),
  headers: demoHeadersWith(connect),
});
console.log(`webgpu-inference demo: ${server.origin}/`);
console.log(
  `While a tab of it is open, curl and servers reach its API at ${server.origin}/openai/v1 (relayed to the tab).`,
);
