#!/usr/bin/env node
/**
 * llama.cpp's own quantizer, native, for the CPU benchmark's K-quant file: our GGUF writer
 * (scripts/test-gguf.mjs) writes Q4_0 and Q8_0, and llama.cpp's Q4_K_M mix (Q4_K, with Q6_K for
 * half the attention values and feed-forward downs, and its fallbacks for rows that are not a
 * multiple of 256) is best made by llama.cpp itself.
 *
 * Built once from the same source as our WebAssembly build (node-llama-cpp's git bundle, see
 * scripts/llama-source.mjs), with the system's CMake and C++ compiler (apt-get install cmake g++),
 * into the temporary folder; only the `llama-quantize` target.
 *
 * Usage: node scripts/llama-quantize.mjs <in.gguf> <out.gguf> <type, e.g. Q4_K_M>
 */
import { execFileSync } from "node:child_process";
import { existsSync, renameSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { llamaSource, llamaWork } from "./llama-source.mjs";

const build = join(llamaWork, "build-native-quantize");
const tool = join(build, "bin/llama-quantize");

function need(command) {
  try {
    execFileSync(command, ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error(
      `the native quantizer needs ${command}, which is not installed: apt-get install cmake g++ (it builds llama.cpp's llama-quantize once)`,
    );
  }
}

/** The built tool's path, building it first when it is not there. */
export function quantizer() {
  if (existsSync(tool)) return tool;
  need("cmake");
  need("c++");
  const { dir } = llamaSource({ reuse: true });
  const options = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF"];
  const off = ["LLAMA_BUILD_TESTS", "LLAMA_BUILD_EXAMPLES", "LLAMA_BUILD_SERVER", "GGML_OPENMP"];
  execFileSync("cmake", ["-S", dir, "-B", build, ...options, ...off.map((name) => `-D${name}=OFF`)], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  execFileSync("cmake", ["--build", build, "--target", "llama-quantize", "-j", String(availableParallelism())], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  return tool;
}

/**
 * Writes `output` as `input` quantized to `type` (requantizing a quantized input), once: an
 * output newer than its input is kept. Returns `output`.
 */
export function quantizeGguf(input, output, type) {
  if (existsSync(output) && statSync(output).mtimeMs >= statSync(input).mtimeMs) return output;
  const partial = `${output}.partial`;
  // Its log (a line per tensor) is shown only if it fails.
  execFileSync(quantizer(), ["--allow-requantize", input, partial, type], { stdio: "pipe" });
  renameSync(partial, output);
  return output;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const [input, output, type] = process.argv.slice(2);
  if (!input || !output || !type) throw new Error("usage: node scripts/llama-quantize.mjs <in.gguf> <out.gguf> <type>");
  console.log(quantizeGguf(resolve(input), resolve(output), type));
}
