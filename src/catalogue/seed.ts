/**
 * The seed catalogue as plain data (no schema code), so a page can import it without the
 * worker's validation library. The catalogue (src/catalogue/catalogue.ts) validates it with the rest.
 */
import type { ModelEntryInput } from "./entry.js";

type BuildInput = NonNullable<ModelEntryInput["builds"]>[number];
type GgufInput = NonNullable<ModelEntryInput["gguf"]>[number];

/** The KV cache shapes, from each model's config.json (num_hidden_layers, num_key_value_heads, head_dim). */
const llama3_8b = { layers: 32, kvHeads: 8, headDim: 128 };
const llama3_70b = { layers: 80, kvHeads: 8, headDim: 128 };
const gemma2_9b = { layers: 42, kvHeads: 8, headDim: 256 };
const mistral_7b = { layers: 32, kvHeads: 8, headDim: 128 };
const arcticEmbedS = { layers: 12, kvHeads: 12, headDim: 32 };
const nomicEmbedText = { layers: 12, kvHeads: 12, headDim: 64 };

/** Model libraries are named relative to the web-llm module's own library folder by default. */
function build(
  modelId: string,
  modelLib: string,
  quantization: string,
  estimatedMemoryMB: number,
  extra: Partial<BuildInput> = {},
): BuildInput {
  return {
    modelId,
    model: modelId,
    modelLib,
    quantization,
    requiredFeatures: quantization.includes("f16") ? ["shader-f16"] : [],
    estimatedMemoryMB,
    ...extra,
  };
}

/**
 * A GGUF build split into files of at most 2 GB by llama.cpp's `llama-gguf-split --split
 * --split-max-size 2G <source>.gguf <modelId>`, which names them `<modelId>-0000N-of-0000M.gguf`.
 * Sizes are the published files' (Hugging Face's GB, 10⁹ bytes), in MiB.
 */
function gguf(
  modelId: string,
  quantization: string,
  gigabytes: number,
  files: number,
  kvCache: GgufInput["kvCache"],
): GgufInput {
  const count = String(files).padStart(5, "0");
  return {
    modelId,
    file: `${modelId}-00001-of-${count}.gguf`,
    quantization,
    sizeMB: Math.round((gigabytes * 1e9) / 2 ** 20),
    kvCache,
  };
}

/** The seed catalogue. Its IDs, windows and prices are the hosted contract and are kept exactly. */
export const seedCatalogue: readonly ModelEntryInput[] = [
  {
    id: "alpha3:8b-instruct-q8_0",
    created: 1_713_398_400,
    family: "llama3",
    contextWindow: 8_192,
    price: { inputNanoUsdPerToken: 10, outputNanoUsdPerToken: 20 },
    builds: [
      build("Llama-3-8B-Instruct-q4f16_1-MLC", "Llama-3-8B-Instruct-q4f16_1_cs1k-webgpu.wasm", "q4f16_1", 5_001, {
        kvCache: llama3_8b,
      }),
      build("Llama-3-8B-Instruct-q4f32_1-MLC", "Llama-3-8B-Instruct-q4f32_1_cs1k-webgpu.wasm", "q4f32_1", 6_101, {
        kvCache: llama3_8b,
      }),
    ],
    // The Q8_0 its name promises.
    gguf: [gguf("Meta-Llama-3-8B-Instruct-Q8_0", "Q8_0", 8.54, 5, llama3_8b)],
  },
  {
    id: "alpha-3-70b-instruct",
    created: 1_713_398_400,
    family: "llama3",
    contextWindow: 16_384,
    price: { inputNanoUsdPerToken: 100, outputNanoUsdPerToken: 200 },
    // MLC publishes no f32 build of the 70B model: without shader-f16 it cannot run locally.
    builds: [
      build("Llama-3-70B-Instruct-q3f16_1-MLC", "Llama-3-70B-Instruct-q3f16_1_cs1k-webgpu.wasm", "q3f16_1", 31_153, {
        kvCache: llama3_70b,
      }),
    ],
    gguf: [gguf("Meta-Llama-3-70B-Instruct-Q4_K_M", "Q4_K_M", 42.5, 21, llama3_70b)],
  },
  {
    id: "beta-2-9b-it",
    created: 1_719_446_400,
    family: "gemma2",
    contextWindow: 8_192,
    price: { inputNanoUsdPerToken: 5, outputNanoUsdPerToken: 10 },
    builds: [
      build("gemma-2-9b-it-q4f16_1-MLC", "gemma-2-9b-it-q4f16_1_cs1k-webgpu.wasm", "q4f16_1", 6_422, {
        kvCache: gemma2_9b,
      }),
      build("gemma-2-9b-it-q4f32_1-MLC", "gemma-2-9b-it-q4f32_1_cs1k-webgpu.wasm", "q4f32_1", 8_383, {
        kvCache: gemma2_9b,
      }),
    ],
    // Q8_0 where the memory allows, else Q4_K_M.
    gguf: [
      gguf("gemma-2-9b-it-Q8_0", "Q8_0", 9.83, 5, gemma2_9b),
      gguf("gemma-2-9b-it-Q4_K_M", "Q4_K_M", 5.76, 3, gemma2_9b),
    ],
  },
  {
    id: "gamma-7b-instruct-v0.3",
    created: 1_716_422_400,
    family: "mistral",
    contextWindow: 4_096,
    price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
    builds: [
      build(
        "Mistral-7B-Instruct-v0.3-q4f16_1-MLC",
        "Mistral-7B-Instruct-v0.3-q4f16_1_cs1k-webgpu.wasm",
        "q4f16_1",
        4_573,
        {
          overrides: { sliding_window_size: -1 },
          kvCache: mistral_7b,
        },
      ),
      build(
        "Mistral-7B-Instruct-v0.3-q4f32_1-MLC",
        "Mistral-7B-Instruct-v0.3-q4f32_1_cs1k-webgpu.wasm",
        "q4f32_1",
        5_619,
        {
          overrides: { sliding_window_size: -1 },
          kvCache: mistral_7b,
        },
      ),
    ],
    gguf: [
      gguf("Mistral-7B-Instruct-v0.3-Q8_0", "Q8_0", 7.7, 4, mistral_7b),
      gguf("Mistral-7B-Instruct-v0.3-Q4_K_M", "Q4_K_M", 4.37, 3, mistral_7b),
    ],
  },
  // Embedding models. Their family is only the tokenizer that bounds an input before admission:
  // llama.cpp and web-llm count and bill with the model's own vocabulary.
  {
    id: "snowflake-arctic-embed-s",
    kind: "embedding",
    created: 1_713_225_600,
    family: "llama3",
    contextWindow: 512,
    dimensions: 384,
    price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 0 },
    // Runs on both engines: MLC's prebuilt build (batch 4) on WebGPU, a Q8_0 GGUF on the CPU (Q8_0,
    // not F16: our WebAssembly build's Q8_0 products are the fast ones, bench/results/embeddings.md).
    builds: [
      build(
        "snowflake-arctic-embed-s-q0f32-MLC-b4",
        "snowflake-arctic-embed-s-q0f32-ctx512_cs512_batch4-webgpu.wasm",
        "q0f32",
        239,
        { model: "snowflake-arctic-embed-s-q0f32-MLC", downloadMB: 127 },
      ),
    ],
    gguf: [
      {
        modelId: "snowflake-arctic-embed-s-Q8_0",
        file: "snowflake-arctic-embed-s-Q8_0.gguf",
        quantization: "Q8_0",
        sizeMB: 35,
        kvCache: arcticEmbedS,
      },
    ],
  },
  {
    id: "nomic-embed-text-v1.5",
    kind: "embedding",
    created: 1_707_955_200,
    family: "llama3",
    // The GGUF's nomic-bert.context_length.
    contextWindow: 2_048,
    dimensions: 768,
    matryoshkaDimensions: [64, 128, 256, 512],
    price: { inputNanoUsdPerToken: 2, outputNanoUsdPerToken: 0 },
    // llama.cpp only: MLC publishes no build of it.
    gguf: [
      {
        modelId: "nomic-embed-text-v1.5-Q8_0",
        file: "nomic-embed-text-v1.5.Q8_0.gguf",
        quantization: "Q8_0",
        sizeMB: 139,
        kvCache: nomicEmbedText,
      },
    ],
  },
];
