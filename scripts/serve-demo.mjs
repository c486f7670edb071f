#!/usr/bin/env node
/** Serves the built demo (page, its worker, tokenizers) on http://localhost:$PORT (default 5173). */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startStaticServer } from "./static-server.mjs";

const root = resolve(fileURLToPath(import.meta.url), "../..");
for (const required of ["dist/demo/index.html", "dist/demo/sw.js"]) {
  if (!existsSync(resolve(root, required))) {
    console.error(`${required} is missing: run 'npm start', which builds it first.`);
    process.exit(1);
  }
}
const port = Number(process.env.PORT ?? 5173);
const server = await startStaticServer([{ prefix: "/", directory: resolve(root, "dist/demo") }], { port });
console.log(`webgpu-inference demo: ${server.origin}/`);
