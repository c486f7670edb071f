/**
 * The configuration a worker serves with. It is plain JSON: a page sends it to the ready-made
 * worker in a message, and the worker keeps it in IndexedDB (src/runtime/config/store.ts) for restarts.
 */
import { z } from "zod";
import { modelOverrideSchema } from "../../catalogue/entry.js";
import { assertSecureUrl } from "../../core/secure-url.js";
import { SetupError } from "../../core/errors/setup.js";

export { assertSecureUrl } from "../../core/secure-url.js";

export const inferenceConfigSchema = z.strictObject({
  /** Absolute URL under which the API answers, e.g. `https://app.example/openai`; `/v1` below it is optional. */
  baseUrl: z.string().url(),
  /**
   * `webllm` (WebGPU), `llamacpp` (llama.cpp, in a Worker an open page starts; on the CPU,
   * or on WebGPU where the adapter has `shader-f16`),
   * `auto`: per model and device, web-llm on a real GPU adapter, else llama.cpp where the model
   * fits (src/engines/choice.ts); `deterministic` is for tests. A catalogue entry may pin its own.
   */
  engine: z.enum(["auto", "webllm", "llamacpp", "deterministic"]).default("webllm"),
  /**
   * Where web-llm runs: in the worker, in a host page (for browsers without WebGPU in
   * service workers), or `auto`: the worker when it has WebGPU, else a host page. llama.cpp
   * always runs in a page's Worker.
   */
  engineHost: z.enum(["auto", "worker", "page"]).default("auto"),
  /** Catalogue overrides (by id) and additions. */
  models: z.array(modelOverrideSchema).default([]),
  artifacts: z
    .strictObject({
      modelBaseUrl: z.string().url().optional(),
      modelLibBaseUrl: z.string().url().optional(),
      tokenizerBaseUrl: z.string().url().optional(),
      /** Where GGUF files are: relative `gguf[].file` names resolve against it. Default: `models/` beside the worker script. */
      ggufBaseUrl: z.string().url().optional(),
    })
    .default({}),
  /** Default per-key limits, per minute; each key may set its own. */
  limits: z
    .strictObject({ rpm: z.number().int().min(1).default(60), tpm: z.number().int().min(1).default(150_000) })
    .default({ rpm: 60, tpm: 150_000 }),
  /**
   * How `X-RateLimit-Reset-Requests` and `-Tokens` say when the window starts again: `timestamp`,
   * an ISO 8601 UTC timestamp (`2026-12-01T20:33:00.000Z`), as this product's contract has it; or
   * `duration`, the hosted API's Go duration (`8.64s`), for clients that parse that (go-openai).
   */
  rateLimitResets: z.enum(["timestamp", "duration"]).default("timestamp"),
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

/** Validates a configuration and fills in the defaults, naming the option at fault in an error. */
export function resolveConfig(config: InferenceConfig): ResolvedConfig {
  const parsed = inferenceConfigSchema.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new SetupError(
      "invalid_option",
      `the option \`${issue.path.join(".") || "(options)"}\` is invalid: ${issue.message}.`,
    );
  }
  assertSecureUrl(parsed.data.baseUrl);
  return parsed.data;
}

/**
 * The top-level options whose values differ between two configurations, as
 * "name: a → b", for an error a person reads. Only `keys` are compared when given.
 */
export function differingOptions(
  current: Record<string, unknown>,
  wanted: Record<string, unknown>,
  keys: string[] = [...new Set([...Object.keys(current), ...Object.keys(wanted)])],
): string[] {
  const show = (value: unknown) => (value === undefined ? "unset" : JSON.stringify(value));
  return keys
    .filter((key) => JSON.stringify(current[key]) !== JSON.stringify(wanted[key]))
    .map((key) => `${key}: ${show(current[key])} → ${show(wanted[key])}`);
}
