#!/usr/bin/env node
/**
 * Serves the built demo (page, its worker, tokenizers) on http://localhost:$PORT (default 5173),
 * and relays requests to its API from curl and servers to an open tab (scripts/relay.mjs).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { demoHeaders } from "./demo-headers.mjs";
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
const server = await startStaticServer([{ prefix: "/", directory: resolve(root, "dist/demo") }], {
  port,
  extend: (origin) => createRelay({ origin, log: (line) => console.log(line) }),
  headers: demoHeaders,
});
console.log(`webgpu-inference demo: ${server.origin}/`);
console.log(
  `While a tab of it is open, curl and servers reach its API at ${server.origin}/openai/v1 (relayed to the tab).`,
);
