/**
 * Vectors as the wire carries them: cut to the asked size (a Matryoshka model's), L2-normalised
 * as llama-server and OpenAI return them, and written as floats or as base64.
 */
import { base64OfFloats, type Embedding } from "../../core/wire/embeddings.js";
import { normalised } from "../../pipeline/embedding.js";

/** The list's items, in input order. */
export function embeddingItems(
  vectors: readonly Float32Array[],
  size: number | undefined,
  format: "float" | "base64",
): Embedding[] {
  return vectors.map((vector, index) => {
    const unit = normalised(vector, size);
    return { object: "embedding", index, embedding: format === "base64" ? base64OfFloats(unit) : Array.from(unit) };
  });
}
