import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import type { ModelEntryInput } from "../../src/index.js";

const template = readFileSync(resolve(import.meta.dirname, "../../scripts/test-model-entry.json"), "utf8");

/** The generated random-weight Qwen2 model, as a catalogue entry whose artifacts `origin` serves under `/<weights>/`. */
export function testModelEntry(origin: string, weights = "test-model"): ModelEntryInput {
  return JSON.parse(template.replaceAll("{origin}", origin).replaceAll("{weights}", weights)) as ModelEntryInput;
}

export const testModelId = (JSON.parse(template) as ModelEntryInput).id;

/** The generated random-weight Llama 3 GGUF (scripts/test-gguf.mjs) as a catalogue entry for llama.cpp, served under `/test-gguf/`. */
export function testGgufEntry(origin: string): ModelEntryInput {
  return {
    id: "llama3-test",
    family: "llama3",
    contextWindow: 2_048,
    price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
    gguf: [
      {
        modelId: "llama3-test-q8_0",
        file: `${origin}/test-gguf/llama3-test-q8_0.gguf`,
        quantization: "Q8_0",
        sizeMB: 44,
        kvCache: { layers: 4, kvHeads: 2, headDim: 64 },
      },
    ],
  };
}
