/**
 * The model objects: `model`, the `list` of them, and our `model.info`.
 */
import { z } from "zod";

export const modelSchema = z.strictObject({
  id: z.string(),
  object: z.literal("model"),
  created: z.number().int(),
  owned_by: z.string(),
});

export const modelListSchema = z.strictObject({ object: z.literal("list"), data: z.array(modelSchema) });

export const modelInfoSchema = z.strictObject({
  id: z.string(),
  object: z.literal("model.info"),
  /** `chat` (the generation endpoints) or `embedding` (`/v1/embeddings`). */
  kind: z.enum(["chat", "embedding"]),
  family: z.string(),
  context_window: z.number().int(),
  /** An embedding model's vector size, and the sizes `dimensions` may cut it to; null for a chat model. */
  dimensions: z.number().int().nullable(),
  matryoshka_dimensions: z.array(z.number().int()).nullable(),
  pricing: z.strictObject({
    currency: z.literal("USD"),
    input_per_1m_tokens: z.number(),
    output_per_1m_tokens: z.number(),
    input_nano_usd_per_token: z.number().int(),
    output_nano_usd_per_token: z.number().int(),
  }),
  /** The engine that serves the model on this device, and why. */
  engine: z.string(),
  engine_reason: z.string(),
  build: z
    .strictObject({
      /** `mlc` (web-llm) or `gguf` (llama.cpp). */
      format: z.enum(["mlc", "gguf"]),
      model_id: z.string(),
      model_url: z.string(),
      /** The compiled model library; null for a GGUF build. */
      model_lib_url: z.string().nullable(),
      quantization: z.string(),
      required_features: z.array(z.string()),
      estimated_memory_mb: z.number(),
      /** The weights' download size in MB; null where the catalogue does not say. */
      download_mb: z.number().nullable(),
    })
    .nullable(),
  builds: z.array(z.string()),
  gguf_builds: z.array(z.string()),
  downloaded: z.boolean(),
  loaded: z.boolean(),
  /** llama.cpp's CPU threads for the loaded model; null when it is not loaded there. */
  threads: z.number().int().nullable(),
  runnable: z.strictObject({ ok: z.boolean(), reason: z.string().nullable() }),
  /** Where a request for this model goes now, and why; the same as the `X-Inference-Route` headers. */
  routing: z.strictObject({
    policy: z.enum(["local", "remote", "auto"]),
    target: z.enum(["local", "remote"]),
    reason: z.string(),
    upstreams: z.array(z.string()),
  }),
  /**
   * Where a reply is generated now: this device's engine, or the upstreams' hosts in failover
   * order; the same as each response's `X-Inference-Generated-By` (which names the one used).
   */
  generated_by: z.strictObject({
    where: z.enum(["device", "upstream"]),
    engine: z.string().nullable(),
    hosts: z.array(z.string()),
  }),
});

export type ModelObject = z.infer<typeof modelSchema>;
export type ModelInfo = z.infer<typeof modelInfoSchema>;
