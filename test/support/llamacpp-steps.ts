/**
 * Greedy steps through our llama.cpp C API, for comparing builds' kernels: the same prompt and
 * tokens give the same top-ten ids and log probabilities, bit for bit, where two builds compute
 * alike. Shared by the unit tests (Node) and the browser harness (Chromium, which runs the
 * Memory64 builds that Node 20 cannot).
 */
import type { LlamaCApi } from "../../src/engines/llamacpp/c-api.js";

export interface StepModule extends LlamaCApi {
  FS: { mkdir(path: string): void; writeFile(path: string, data: Uint8Array): void };
}

export type Steps = { ids: number[]; logprobs: number[] }[];

function check(ok: boolean, what: string, llama: StepModule): void {
  if (!ok) throw new Error(`${what} failed: ${llama.UTF8ToString(llama._wi_error())}`);
}

/** `value` as a C string in the module's memory. */
export function cString(llama: StepModule, value: string): number {
  const length = llama.lengthBytesUTF8(value);
  const pointer = llama._malloc(length + 1);
  llama.stringToUTF8(value, pointer, length + 1);
  return pointer;
}

/**
 * The top ten ids and log probabilities after `prompt` (decoded in one batch from an empty
 * context) and after each of four greedy tokens decoded one at a time.
 */
export function greedyTopTens(llama: StepModule, prompt: number[]): Steps {
  check(llama._wi_forget(0) === 0, "forget", llama);
  const out = llama._malloc(4096);
  llama.HEAP32.set(prompt, out / 4);
  check(llama._wi_decode(out, prompt.length, 0) === 0, "the prompt's decode", llama);
  check(llama._wi_sampler(0, 1, 0, 0, 1, 0, 0, 0, cString(llama, "")) === 0, "the sampler", llama);
  const steps: Steps = [];
  for (let position = prompt.length; steps.length < 4; position++) {
    const ids = llama._malloc(4096);
    const token = llama._wi_sample(10, ids, ids + 11 * 4, 2_000);
    steps.push({
      ids: Array.from(llama.HEAP32.subarray(ids / 4, ids / 4 + 11)),
      logprobs: Array.from(new Float32Array(llama.HEAPU8.buffer, ids + 11 * 4, 11)),
    });
    llama.HEAP32[out / 4] = token;
    check(llama._wi_decode(out, 1, position) === 0, "a token's decode", llama);
  }
  return steps;
}

/**
 * `greedyTopTens` of a 15-token prompt on the GGUF at `path` in the module's file system, with
 * our tiles on or off (off: ggml's own kernels); and whether the tiles computed any chunk.
 */
export function topTens(llama: StepModule, path: string, tiles: boolean): { steps: Steps; tiled: boolean } {
  check(llama._wi_load(cString(llama, path), 512, 32, 1, 0) === 0, `loading ${path}`, llama);
  llama._wi_tiles(tiles ? 1 : 0);
  const steps = greedyTopTens(
    llama,
    Array.from({ length: 15 }, (_, at) => 1000 + 37 * at),
  );
  return { steps, tiled: llama._wi_tiles(1) > 0 };
}
