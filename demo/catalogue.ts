/**
 * The demo's own catalogue additions: a small instruct model that runs on the CPU with llama.cpp,
 * so a device without a usable GPU still gets a real answer. Its GGUF is Qwen's own, one file
 * under 2 GB, fetched from Hugging Face (which serves it with CORS). The seed models' GGUF builds
 * are split files an app hosts itself (`artifacts.ggufBaseUrl`); this demo hosts none, so it drops
 * them rather than offer downloads that cannot succeed. A deployment's `?config=` adds to this or overrides it.
 */
import type { ModelEntryInput, StartInferenceOptions } from "../src/index.js";

export const cpuModelId = "qwen2.5-0.5b-instruct";

const cpuModel: ModelEntryInput = {
  id: cpuModelId,
  family: "qwen2",
  contextWindow: 4_096,
  price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
  gguf: [
    {
      modelId: "qwen2.5-0.5b-instruct-q4_k_m",
      // Pinned: a fixed revision of Qwen's repository, and the file's SHA-256 (491,400,032 bytes),
      // checked before the download is kept.
      file: "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/9217f5db79a29953eb74d5343926648285ec7e67/qwen2.5-0.5b-instruct-q4_k_m.gguf",
      sha256: ["74a4da8c9fdbcd15bd1f6d01d621410d31c6fc00986f5eb687824e7b93d7a9db"],
      quantization: "Q4_K_M",
      sizeMB: 469,
      kvCache: { layers: 24, kvHeads: 2, headDim: 64 },
    },
  ],
};

const seedIds = [
  "alpha3:8b-instruct-q8_0",
  "alpha-3-70b-instruct",
  "beta-2-9b-it",
  "gamma-7b-instruct-v0.3",
  "snowflake-arctic-embed-s",
];

/**
 * The Matryoshka embedding model has a GGUF build only: the demo takes Nomic's own file from
 * Hugging Face. It names the repository's main branch: no revision or hash of it could be read
 * where this demo was written, so a deployment that needs it pinned overrides it with `?config=`.
 */
const nomicEmbedText: NonNullable<StartInferenceOptions["models"]>[number] = {
  id: "nomic-embed-text-v1.5",
  gguf: [
    {
      modelId: "nomic-embed-text-v1.5-Q8_0",
      file: "https://huggingface.co/nomic-ai/nomic-embed-text-v1.5-GGUF/resolve/main/nomic-embed-text-v1.5.Q8_0.gguf",
      quantization: "Q8_0",
      sizeMB: 139,
      kvCache: { layers: 12, kvHeads: 12, headDim: 64 },
    },
  ],
};

export const demoModels: NonNullable<StartInferenceOptions["models"]> = [
  ...seedIds.map((id) => ({ id, gguf: [] })),
  nomicEmbedText,
  cpuModel,
];
