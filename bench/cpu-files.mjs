/**
 * The CPU benchmark's three files, with Qwen2-0.5B's shapes and the Llama 3 vocabulary: our
 * writer's Q4_0 and Q8_0 (scripts/test-gguf.mjs), and llama.cpp's own Q4_K_M mix, quantized
 * natively from the Q8_0 (scripts/llama-quantize.mjs). bench/cpu.mjs and bench/builds.mjs time
 * the same files.
 */
import { join } from "node:path";
import { quantizeGguf } from "../scripts/llama-quantize.mjs";
import { buildTestGguf } from "../scripts/test-gguf.mjs";

export const q4kmFile = "qwen2-0.5b-shape-q4_k_m.gguf";

/** The three files' paths in `directory`, each written there once. */
export function cpuBenchFiles(directory) {
  const q8 = buildTestGguf(directory, "bench-q8_0");
  return { q4: buildTestGguf(directory, "bench"), q8, q4km: quantizeGguf(q8, join(directory, q4kmFile), "Q4_K_M") };
}
