import { statSync } from "node:fs";
import { join } from "node:path";
import { ggufVariants } from "../scripts/test-gguf.mjs";

/**
 * A benchmark's embedding file (scripts/test-gguf.mjs, written into `directory`) as a catalogue
 * entry for our llama.cpp engine, its GGUF served under `${origin}/test-gguf/`.
 */
export function embeddingEntry(variant, origin, directory) {
  const shape = ggufVariants[variant];
  return {
    id: variant,
    kind: "embedding",
    family: "llama3",
    contextWindow: shape.contextLength,
    dimensions: shape.embedding,
    price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 0 },
    engine: "llamacpp",
    gguf: [
      {
        modelId: shape.file.replace(/\.gguf$/, ""),
        file: `${origin}/test-gguf/${shape.file}`,
        quantization: shape.type.toUpperCase(),
        sizeMB: statSync(join(directory, shape.file)).size / 2 ** 20,
        kvCache: { layers: shape.layers, kvHeads: shape.kvHeads, headDim: shape.embedding / shape.heads },
      },
    ],
  };
}
