#!/usr/bin/env node
/**
 * llama.cpp's own quantizer, native, for the CPU benchmark's K-quant file: our GGUF writer
 * (scripts/test-gguf.mjs) writes Q4_0, Q5_0 and Q8_0, and llama.cpp's Q4_K_M mix (Q4_K, with
 * Q6_K for half the attention values and feed-forward downs, and its fallbacks for rows that are
 * not a multiple of 256) is best made by llama.cpp itself.
 *
 * Built once from the same source as our WebAssembly build (scripts/llama-native.mjs).
 *
 * Usage: node scripts/llama-quantize.mjs <in.gguf> <out.gguf> <type, e.g. Q4_K_M>
 */
import { execFileSync } from "node:child_process";
import { existsSync, renameSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { nativeTool } from "./llama-native.mjs";

/**
 * Writes `output` as `input` quantized to `type` (requantizing a quantized input), once: an
 * output newer than its input is kept. Returns `output`.
 */
export function quantizeGguf(input, output, type) {
  if (existsSync(output) && statSync(output).mtimeMs >= statSync(input).mtimeMs) return output;
  const partial = `${output}.partial`;
  // Its log (a line per tensor) is shown only if it fails.
  execFileSync(nativeTool("llama-quantize"), ["--allow-requantize", input, partial, type], { stdio: "pipe" });
  renameSync(partial, output);
  return output;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const [input, output, type] = process.argv.slice(2);
  if (!input || !output || !type) throw new Error("usage: node scripts/llama-quantize.mjs <in.gguf> <out.gguf> <type>");
  console.log(quantizeGguf(resolve(input), resolve(output), type));
}
