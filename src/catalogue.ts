/**
 * The model catalogue: public model IDs, their contract (context window, prices) and the
 * real MLC builds behind them. It is plain data, so an app can override or add models.
 *
 * Money is integer nano-USD per token: 0.001 USD per 1M tokens is exactly 1 nano-USD per token.
 */
import { z } from "zod";
import { seedCatalogue } from "./seed-catalogue.js";
import { assertSecureUrl } from "./secure-url.js";

import { modelFamilies } from "./families.js";

export { modelFamilies, type ModelFamily } from "./families.js";

const kvCacheSchema = z.strictObject({ layers: z.number().int().positive(), kvHeads: z.number().int().positive(), headDim: z.number().int().positive() });

export const mlcBuildSchema = z.strictObject({
  /** web-llm's `model_id`. */
  modelId: z.string().min(1),
  /** Base URL of the weights folder; relative names resolve against `artifacts.modelBaseUrl`. */
  model: z.string().min(1),
  /** The compiled model library; relative names resolve against `artifacts.modelLibBaseUrl`. */
  modelLib: z.string().min(1),
  quantization: z.string().min(1),
  /** WebGPU features the build needs, e.g. `shader-f16`. A build is skipped when the adapter lacks one. */
  requiredFeatures: z.array(z.string()).default([]),
  /**
   * GPU memory in MB as web-llm estimates it (`vram_required_MB`): weights, activations and the
   * KV cache at `memoryReferenceWindow` tokens, the window MLC measures its prebuilt builds at.
   */
  estimatedMemoryMB: z.number().positive(),
  /** The weights' download size in MB, where known (shown by `/v1/model/info` as `build.download_mb`). */
  downloadMB: z.number().positive().optional(),
  /** The KV cache's shape, so the estimate can follow the catalogue's window (`memoryEstimateMB`). */
  kvCache: kvCacheSchema.optional(),
  /** web-llm `overrides` besides the context window, which always comes from the catalogue. */
  overrides: z.record(z.string(), z.number()).default({}),
});

/** llama.cpp's split naming, `<name>-00001-of-00003.gguf`: the first shard names them all. */
const splitPattern = /-(\d{5})-of-(\d{5})\.gguf$/;

/** Every file of a GGUF build: the parts a split model's first part names, or the one file. */
export function ggufFiles(file: string): string[] {
  const split = splitPattern.exec(file);
  if (!split) return [file];
  return Array.from({ length: Number(split[2]) }, (_, index) => `${file.slice(0, split.index)}-${String(index + 1).padStart(5, "0")}-of-${split[2]}.gguf`);
}

/** The largest file a browser engine may read whole (wllama's limit); bigger models are split. */
export const maxGgufFileMB = 2_048;

/**
 * A GGUF build for llama.cpp (the `llamacpp` engine). Files over 2 GB are split with llama.cpp's
 * `llama-gguf-split`; `file` then names the first shard.
 */
export const ggufBuildSchema = z
  .strictObject({
    /** A name for the build, shown in `/v1/model/info`. */
    modelId: z.string().min(1),
    /** The GGUF file, or a split model's first shard; relative names resolve against `artifacts.ggufBaseUrl`. */
    file: z.string().min(1).regex(/\.gguf$/, "a GGUF file name ends in .gguf"),
    quantization: z.string().min(1),
    /** The files' total size in MB: the weights llama.cpp holds in memory. */
    sizeMB: z.number().positive(),
    /** The KV cache's shape, for the memory estimate at the catalogue's window. */
    kvCache: kvCacheSchema,
  })
  .superRefine((build, context) => {
    const split = splitPattern.exec(build.file);
    const files = ggufFiles(build.file).length;
    if (split && split[1] !== "00001") context.addIssue({ code: "custom", path: ["file"], message: `name the first shard (…-00001-of-${split[2]}.gguf), not shard ${split[1]}` });
    if (build.sizeMB / files > maxGgufFileMB) {
      context.addIssue({
        code: "custom",
        path: ["file"],
        message: `${build.modelId} is ${Math.round(build.sizeMB)} MB in ${files} file(s): a browser reads files of at most ${maxGgufFileMB} MB. Split it (llama-gguf-split --split-max-size 2G) and name the first shard`,
      });
    }
  });

const safeNano = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/**
 * A remote engine speaking OpenAI's protocol (vLLM, llama.cpp's llama-server, Ollama, the hosted
 * API) that serves this model when the device does not. The secret is not here: configuration
 * is written in app code and sent between page and worker, so `credential` only names a secret the app stored once
 * through the admin API (`setUpstreamCredential`), which stays in the worker's database.
 */
export const upstreamSchema = z.strictObject({
  name: z.string().min(1),
  /** Up to and including `/v1`, e.g. `https://llm.example/v1`; `https:` unless loopback. */
  baseUrl: z.string().url(),
  /** The model's name upstream. */
  model: z.string().min(1),
  /** The stored credential sent as `Authorization: Bearer …`; none for an open upstream. */
  credential: z.string().min(1).optional(),
});
export type Upstream = z.infer<typeof upstreamSchema>;

/** `local`: this device only; `remote`: the upstreams only; `auto`: local when the device can run it, else remote. */
/** The engines that run a model on this device; `auto` picks one per model and device (`chooseEngine`). */
export const localEngines = ["webllm", "llamacpp"] as const;
export type LocalEngine = (typeof localEngines)[number];

export const routingPolicies = ["local", "remote", "auto"] as const;
export type RoutingPolicy = (typeof routingPolicies)[number];

export const modelEntrySchema = z.strictObject({
  id: z.string().min(1),
  ownedBy: z.string().default("webgpu-inference"),
  created: z.number().int().default(1_714_000_000),
  family: z.enum(modelFamilies),
  contextWindow: z.number().int().positive(),
  price: z.strictObject({ inputNanoUsdPerToken: safeNano, outputNanoUsdPerToken: safeNano }),
  /** MLC builds for web-llm, in order of preference; the first the device can run is used. */
  builds: z.array(mlcBuildSchema).default([]),
  /** GGUF builds for llama.cpp, in order of preference; the first that fits in memory is used. */
  gguf: z.array(ggufBuildSchema).default([]),
  /** Pins this model to one engine; by default the configuration's `engine` decides. */
  engine: z.enum(localEngines).optional(),
  routing: z.enum(routingPolicies).default("local"),
  /** Tried in order: a failure before the first byte moves on to the next. */
  upstreams: z.array(upstreamSchema).default([]),
});

/**
 * An app's entry: a new model, complete, or fields that replace a seed model's. No defaults
 * here: a default would overwrite the seed's value for a field the app did not give.
 */
export const modelOverrideSchema = z.strictObject({
  ...Object.fromEntries(Object.entries(modelEntrySchema.shape).map(([name, field]) => [name, (field instanceof z.ZodDefault ? field.unwrap() : field).optional()])),
  id: modelEntrySchema.shape.id,
}) as unknown as z.ZodType<Partial<ModelEntryInput> & { id: string }>;

/** An entry that can serve: a build unless it is remote-only, an upstream unless it is local-only. */
const servableModelSchema = modelEntrySchema.superRefine((model, context) => {
  if (model.routing !== "remote" && model.builds.length === 0 && model.gguf.length === 0) {
    context.addIssue({ code: "custom", path: ["builds"], message: `${model.id} has routing '${model.routing}' but no build; give it MLC builds, GGUF builds or routing 'remote'` });
  }
  if (model.routing !== "local" && model.upstreams.length === 0) {
    context.addIssue({ code: "custom", path: ["upstreams"], message: `${model.id} has routing '${model.routing}' but no upstream` });
  }
  model.upstreams.forEach((upstream, index) => {
    try {
      assertSecureUrl(upstream.baseUrl, `upstream URL of ${model.id}`);
    } catch (error) {
      context.addIssue({ code: "custom", path: ["upstreams", index, "baseUrl"], message: (error as Error).message });
    }
  });
});

export type MlcBuild = z.infer<typeof mlcBuildSchema>;
export type GgufBuild = z.infer<typeof ggufBuildSchema>;
export type ModelEntry = z.infer<typeof modelEntrySchema>;
export type ModelEntryInput = z.input<typeof modelEntrySchema>;

export { seedCatalogue } from "./seed-catalogue.js";

export class Catalogue {
  readonly #models: Map<string, ModelEntry>;

  constructor(models: Iterable<ModelEntry>) {
    this.#models = new Map([...models].map((model) => [model.id, model]));
  }

  /**
   * The seed plus an app's entries. An entry with a seed ID replaces fields of that model;
   * a new ID must be complete.
   */
  static create(additions: readonly (Partial<ModelEntryInput> & { id: string })[] = []): Catalogue {
    const merged = new Map<string, Partial<ModelEntryInput>>(seedCatalogue.map((model) => [model.id, model]));
    for (const addition of additions) merged.set(addition.id, { ...merged.get(addition.id), ...addition });
    return new Catalogue([...merged.values()].map((model) => servableModelSchema.parse(model)));
  }

  get(id: string): ModelEntry | undefined {
    return this.#models.get(id);
  }

  list(): ModelEntry[] {
    return [...this.#models.values()];
  }
}

/** Price per 1M tokens in USD, for display: nano-USD per token × 10⁶ / 10⁹. */
export function usdPerMillion(nanoUsdPerToken: number): number {
  return nanoUsdPerToken / 1_000;
}

export interface DeviceFeatures {
  webgpu: boolean;
  features: ReadonlySet<string>;
  /**
   * The adapter is a software or fallback one (SwiftShader, llvmpipe): it runs WebGPU on the
   * CPU, far slower than llama.cpp's CPU code, so `auto` does not count it as a GPU.
   */
  softwareAdapter?: boolean;
  /** What the device can spend on one model, in MB; undefined when unknown. */
  memoryBudgetMB?: number;
}

/** The context window web-llm's `vram_required_MB` figures assume. */
export const memoryReferenceWindow = 4_096;

/**
 * The build's GPU memory at the model's context window, in MB: web-llm's estimate at
 * `memoryReferenceWindow` tokens, plus the KV cache for the tokens beyond it (or less, for a
 * smaller window): 2 (keys and values) × layers × KV heads × head dimension × bytes per value
 * (2 for f16 builds, 4 for f32) per token. Without `kvCache`, web-llm's estimate as it is.
 */
export function memoryEstimateMB(model: Pick<ModelEntry, "contextWindow">, build: MlcBuild): number {
  if (!build.kvCache) return build.estimatedMemoryMB;
  const { layers, kvHeads, headDim } = build.kvCache;
  const bytesPerValue = /f16/.test(build.quantization) ? 2 : 4;
  const bytesPerToken = 2 * layers * kvHeads * headDim * bytesPerValue;
  return build.estimatedMemoryMB + (bytesPerToken * (model.contextWindow - memoryReferenceWindow)) / 2 ** 20;
}

export type BuildChoice = { ok: true; build: MlcBuild } | { ok: false; reason: string; build: MlcBuild | null };

/** The first build whose features the adapter has, or why none fits. */
export function chooseBuild(model: ModelEntry, device: DeviceFeatures): BuildChoice {
  if (model.builds.length === 0) return { ok: false, reason: `${model.id} has no build for this device's engine; it is served remotely`, build: null };
  if (!device.webgpu) return { ok: false, reason: "WebGPU is not available in this browser", build: null };
  const usable = model.builds.find((build) => build.requiredFeatures.every((feature) => device.features.has(feature)));
  if (!usable) {
    const missing = [...new Set(model.builds.flatMap((build) => build.requiredFeatures))].filter((feature) => !device.features.has(feature));
    return { ok: false, reason: `every build of ${model.id} needs WebGPU feature(s) this adapter lacks: ${missing.join(", ")}`, build: null };
  }
  const needed = memoryEstimateMB(model, usable);
  if (device.memoryBudgetMB !== undefined && needed > device.memoryBudgetMB) {
    return {
      ok: false,
      reason: `${usable.modelId} needs about ${Math.round(needed)} MB of GPU memory at its ${model.contextWindow}-token context window; this device offers about ${Math.round(device.memoryBudgetMB)} MB`,
      build: usable,
    };
  }
  return { ok: true, build: usable };
}

/** What llama.cpp allocates besides weights and KV cache (compute buffers at small batches), in MB. */
const llamaCppOverheadMB = 256;

/**
 * The memory a GGUF build takes at the model's context window, in MB: its weights, an f16 KV
 * cache (2 × layers × KV heads × head dimension × 2 bytes per token) and llama.cpp's buffers.
 */
export function ggufMemoryEstimateMB(model: Pick<ModelEntry, "contextWindow">, build: GgufBuild): number {
  const { layers, kvHeads, headDim } = build.kvCache;
  return build.sizeMB + (2 * layers * kvHeads * headDim * 2 * model.contextWindow) / 2 ** 20 + llamaCppOverheadMB;
}

export type GgufChoice = { ok: true; build: GgufBuild } | { ok: false; reason: string; build: GgufBuild | null };

/** The first GGUF build that fits in `memoryBudgetMB` (any, when the budget is unknown), or why none does. */
export function chooseGgufBuild(model: ModelEntry, memoryBudgetMB: number | undefined): GgufChoice {
  if (model.gguf.length === 0) return { ok: false, reason: `${model.id} has no GGUF build for llama.cpp`, build: null };
  const fitting = model.gguf.find((build) => memoryBudgetMB === undefined || ggufMemoryEstimateMB(model, build) <= memoryBudgetMB);
  if (fitting) return { ok: true, build: fitting };
  const smallest = model.gguf.reduce((best, build) => (ggufMemoryEstimateMB(model, build) < ggufMemoryEstimateMB(model, best) ? build : best));
  return {
    ok: false,
    reason: `${smallest.modelId} needs about ${Math.round(ggufMemoryEstimateMB(model, smallest))} MB of memory at its ${model.contextWindow}-token context window; this device offers about ${Math.round(memoryBudgetMB ?? 0)} MB (set \`memoryBudgetMB\` if it has more)`,
    build: smallest,
  };
}
