/**
 * Vectors as the wire carries them: cut to the asked size (a Matryoshka model's), L2-normalised
 * as llama-server and OpenAI return them, and written as floats or as base64.
 */
import { base64OfFloats, type Embedding } from "../../core/wire/embeddings.js";

/** The vector's first `size` values, scaled to length 1 (a zero vector stays zero). */
function normalised(vector: Float32Array, size: number = vector.length): Float32Array {
  const cut = vector.subarray(0, size);
  let squares = 0;
  for (const value of cut) squares += value * value;
  const scale = squares > 0 ? 1 / Math.sqrt(squares) : 0;
  return Float32Array.from(cut, (value) => value * scale);
}

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
