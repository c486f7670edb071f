import type { ModelEntryInput } from "../../src/index.js";

export const testModelId = "qwen2-0.5b-test";

/** The generated random-weight Qwen2 model, as a catalogue entry whose artifacts `origin` serves. */
export function testModelEntry(origin: string): ModelEntryInput {
  return {
    id: testModelId,
    family: "qwen2",
    contextWindow: 4096,
    price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
    builds: [
      {
        modelId: "Qwen2-0.5B-Instruct-q4f32_1-random",
        model: `${origin}/test-model/`,
        modelLib: `${origin}/test-model/lib/Qwen2-0.5B-Instruct-q4f32_1-ctx4k_cs1k-webgpu.wasm`,
        quantization: "q4f32_1",
        requiredFeatures: [],
        estimatedMemoryMB: 1200,
        overrides: {},
      },
    ],
  };
}
