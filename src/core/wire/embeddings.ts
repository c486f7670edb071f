/**
 * The embeddings request (`POST /v1/embeddings`) and its reply, strict as the chat request is,
 * and an upstream's reply as it is read.
 */
import { z } from "zod";
import { list } from "./collections.js";

/** OpenAI's bound on the inputs of one request. */
const maxEmbeddingInputs = 2048;

/** An input as token ids of the model's tokenizer (checked against its vocabulary by the handler). */
const tokenIds = list(z.number().int());

export const embeddingRequestSchema = z.strictObject({
  model: z.string().min(1),
  // OpenAI's four forms: a string, a list of strings, token ids, or a list of token-id lists.
  input: z.union([
    z.string(),
    list(z.string(), { min: 1, max: maxEmbeddingInputs }),
    list(z.number().int(), { min: 1 }),
    list(tokenIds, { min: 1, max: maxEmbeddingInputs }),
  ]),
  encoding_format: z.enum(["float", "base64"]).nullish(),
  dimensions: z.number().int().min(1).nullish(),
  user: z.string().nullish(),
});

const embeddingSchema = z.strictObject({
  object: z.literal("embedding"),
  index: z.number().int(),
  /** Floats, or (`encoding_format: "base64"`) their little-endian float32 bytes in base64. */
  embedding: z.union([z.array(z.number()), z.string()]),
});

export const embeddingListSchema = z.strictObject({
  object: z.literal("list"),
  data: z.array(embeddingSchema),
  model: z.string(),
  usage: z.strictObject({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
});

export type Embedding = z.infer<typeof embeddingSchema>;
export type EmbeddingList = z.infer<typeof embeddingListSchema>;

/** An upstream's reply, loose as servers write it (llama-server, vLLM, Ollama, the hosted API): only what is used is checked. */
export const upstreamEmbeddingsSchema = z.object({
  data: z.array(
    z.object({
      index: z.number().int().min(0).optional(),
      embedding: z.union([z.array(z.number()), z.string()]),
    }),
  ),
  usage: z.object({ prompt_tokens: z.number().int().min(0) }).nullish(),
});

/** Whether this platform stores numbers little-endian (every browser does), so a float array's own bytes are the wire's. */
function littleEndian(): boolean {
  return new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;
}

/** Little-endian float32 bytes in base64, what the OpenAI SDKs ask for by default and decode. */
export function base64OfFloats(vector: Float32Array): string {
  let bytes = new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength);
  if (!littleEndian()) {
    bytes = new Uint8Array(vector.length * 4);
    const view = new DataView(bytes.buffer);
    vector.forEach((value, index) => view.setFloat32(index * 4, value, true));
  }
  const encoded = (bytes as Uint8Array & { toBase64?: () => string }).toBase64?.();
  if (encoded !== undefined) return encoded;
  let binary = "";
  // In pieces: String.fromCharCode takes a bounded number of arguments.
  for (let start = 0; start < bytes.length; start += 8_192)
    binary += String.fromCharCode(...bytes.subarray(start, start + 8_192));
  return btoa(binary);
}

/** Base64's bytes, in a buffer of their own: `Uint8Array.fromBase64` where the platform has it, else `atob`'s characters. */
function bytesOfBase64(text: string): Uint8Array {
  const decoded = (Uint8Array as { fromBase64?: (text: string) => Uint8Array }).fromBase64?.(text);
  if (decoded !== undefined) return decoded;
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index++) bytes[index] = binary.charCodeAt(index);
  return bytes;
}

/** Little-endian float32 bytes in base64, as OpenAI writes them, read back. */
export function floatsOfBase64(text: string): Float32Array {
  const bytes = bytesOfBase64(text);
  if (bytes.byteLength % 4 !== 0) throw new Error("a base64 embedding is not a whole number of float32 values");
  // The bytes are a fresh buffer of their own (`bytesOfBase64`), so the floats can view it.
  if (littleEndian()) return new Float32Array(bytes.buffer, 0, bytes.byteLength / 4);
  const view = new DataView(bytes.buffer);
  return Float32Array.from({ length: bytes.byteLength / 4 }, (_, index) => view.getFloat32(index * 4, true));
}
