/**
 * The configuration a worker is started with. It is plain JSON, because the ready-made worker
 * receives it in its script URL, which survives the browser stopping and restarting the worker.
 */
import { z } from "zod";
import { modelOverrideSchema } from "./catalogue.js";
import { assertSecureUrl } from "./secure-url.js";

export { assertSecureUrl } from "./secure-url.js";

export const inferenceConfigSchema = z.strictObject({
  /** Absolute URL under which the API answers, e.g. `https://app.example/openai`; `/v1` below it is optional. */
  baseUrl: z.string().url(),
  engine: z.enum(["webllm", "deterministic"]).default("webllm"),
  /**
   * Where the engine runs: in the worker, in a host page (for browsers without WebGPU in
   * service workers), or `auto`: the worker when it has WebGPU, else a host page.
   */
  engineHost: z.enum(["auto", "worker", "page"]).default("auto"),
  /** Catalogue overrides (by id) and additions. */
  models: z.array(modelOverrideSchema).default([]),
  artifacts: z
    .strictObject({
      modelBaseUrl: z.string().url().optional(),
      modelLibBaseUrl: z.string().url().optional(),
      tokenizerBaseUrl: z.string().url().optional(),
    })
    .default({}),
  /** Default per-key limits, per minute; each key may set its own. */
  limits: z.strictObject({ rpm: z.number().int().min(1).default(60), tpm: z.number().int().min(1).default(150_000) }).default({ rpm: 60, tpm: 150_000 }),
  /** The IndexedDB database that holds keys, balances and the ledger. */
  databaseName: z.string().min(1).default("webgpu-inference-policy"),
  /**
   * GPU memory one model may use on this device, in MB. WebGPU does not report it, so the
   * default is the browser's `navigator.deviceMemory` (which Chromium caps); a larger build is
   * reported as not runnable instead of failing mid-load.
   */
  memoryBudgetMB: z.number().positive().optional(),
  /** Requests that may wait for the engine; one more gets 503. */
  maxQueued: z.number().int().min(0).default(32),
  /** Deterministic engine only: pause between tokens. */
  tokenDelayMs: z.number().int().min(0).optional(),
});

export type InferenceConfig = z.input<typeof inferenceConfigSchema>;
export type ResolvedConfig = z.output<typeof inferenceConfigSchema>;

export function resolveConfig(config: InferenceConfig): ResolvedConfig {
  const resolved = inferenceConfigSchema.parse(config);
  assertSecureUrl(resolved.baseUrl);
  return resolved;
}

export const configParameter = "config";

/** The configuration carried in a worker script URL (`?config=<json>`). */
export function configFromScriptUrl(scriptUrl: string): InferenceConfig {
  const raw = new URL(scriptUrl).searchParams.get(configParameter);
  if (!raw) throw new Error(`webgpu-inference: the worker script URL carries no '${configParameter}' parameter; register it through startInference().`);
  return JSON.parse(raw) as InferenceConfig;
}

export function scriptUrlWithConfig(scriptUrl: string, config: InferenceConfig, base: string): string {
  const url = new URL(scriptUrl, base);
  url.searchParams.set(configParameter, JSON.stringify(config));
  return url.href;
}
