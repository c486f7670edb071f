/**
 * Assembles src/retrieval/dots.wat into src/retrieval/dots-wasm.ts, its bytes in base64, so the
 * library needs no assembler at build or run time: `node scripts/dots-wasm.mjs` after changing the
 * text. test/unit/retrieval/search-index.test.ts checks that the two agree.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import wabt from "wabt";

const root = fileURLToPath(new URL("..", import.meta.url));

/** The module's bytes, assembled from its text. */
export async function assembleDots() {
  const text = readFileSync(`${root}/src/retrieval/dots.wat`, "utf8");
  const module = (await wabt()).parseWat("dots.wat", text, { simd: true });
  module.validate();
  return Buffer.from(module.toBinary({}).buffer);
}

/** The TypeScript file that holds them. */
export function dotsSource(bytes) {
  return [
    "// Written by scripts/dots-wasm.mjs from dots.wat: do not edit.",
    `export const dotsWasm = "${bytes.toString("base64")}";`,
    "",
  ].join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  writeFileSync(`${root}/src/retrieval/dots-wasm.ts`, dotsSource(await assembleDots()));
