/**
 * What a model entry is: its public ID, its contract (context window, prices), the real builds
 * behind it (MLC for web-llm, GGUF for llama.cpp) and its upstreams, as zod schemas and the types
 * they give. Plain data, so an app can override or add models.
 *
 * Money is integer nano-USD per token: 0.001 USD per 1M tokens is exactly 1 nano-USD per token.
 */
import { z } from "zod";
import { assertSecureUrl } from "../core/secure-url.js";
import { modelFamilies } from "./families.js";

const kvCacheSchema = z.strictObject({
  layers: z.number().int().positive(),
  kvHeads: z.number().int().positive(),
  headDim: z.number().int().positive(),
});

const sriSchema = z
  .string()
  .regex(
    /^sha(256|384|512)-[A-Za-z0-9+/]+={0,2}$/,
    "an integrity hash is written sha256-<base64>, as in HTML's integrity attribute",
  );

const mlcBuildSchema = z.strictObject({
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
  /**
   * Subresource Integrity hashes (`sha256-<base64>`) web-llm checks before it runs a file: the
   * model library (executable WebAssembly), `mlc-chat-config.json` and the tokenizer files by
   * name. A mismatch fails the load. Pin `model` to a revision too (`…/resolve/<commit>/`).
   */
  integrity: z
    .strictObject({
      modelLib: sriSchema.optional(),
      config: sriSchema.optional(),
      tokenizer: z.record(z.string(), sriSchema).optional(),
    })
    .optional(),
});

/** llama.cpp's split naming, `<name>-00001-of-00003.gguf`: the first shard names them all. */
const splitPattern = /-(\d{5})-of-(\d{5})\.gguf$/;

/**
 * A file's URL as its path and what follows it (a query, as in Hugging Face's `?download=true`,
 * or a fragment): the name is the path's, and every shard keeps the same suffix.
 */
function pathOf(file: string): { path: string; suffix: string } {
  const end = file.search(/[?#]/);
  return end < 0 ? { path: file, suffix: "" } : { path: file.slice(0, end), suffix: file.slice(end) };
}

/** Every file of a GGUF build: the parts a split model's first part names, or the one file. */
export function ggufFiles(file: string): string[] {
  const { path, suffix } = pathOf(file);
  const split = splitPattern.exec(path);
  if (!split) return [file];
  return Array.from(
    { length: Number(split[2]) },
    (_, index) => `${path.slice(0, split.index)}-${String(index + 1).padStart(5, "0")}-of-${split[2]}.gguf${suffix}`,
  );
}

/** The largest file a browser engine may read whole (a Blob read as one file); bigger models are split. */
const maxGgufFileMB = 2_048;

/**
 * A GGUF build for llama.cpp (the `llamacpp` engine). Files over 2 GB are split with llama.cpp's
 * `llama-gguf-split`; `file` then names the first shard.
 */
const ggufBuildSchema = z
  .strictObject({
    /** A name for the build, shown in `/v1/model/info`. */
    modelId: z.string().min(1),
    /** The GGUF file, or a split model's first shard; relative names resolve against `artifacts.ggufBaseUrl`. */
    file: z
      .string()
      .min(1)
      .refine((file) => pathOf(file).path.endsWith(".gguf"), "a GGUF file name ends in .gguf (before any query)"),
    quantization: z.string().min(1),
    /** The files' total size in MB: the weights llama.cpp holds in memory. */
    sizeMB: z.number().positive(),
    /** The KV cache's shape, for the memory estimate at the catalogue's window. */
    kvCache: kvCacheSchema,
    /**
     * Each file's SHA-256 (hex), in shard order: a download that does not hash to it is deleted and
     * refused, so a file changed at its URL never runs. Pin the URL to a revision too.
     */
    sha256: z.array(z.string().regex(/^[0-9a-fA-F]{64}$/, "a SHA-256 is 64 hexadecimal digits")).optional(),
  })
  .superRefine((build, context) => {
    const split = splitPattern.exec(pathOf(build.file).path);
    const files = ggufFiles(build.file).length;
    if (build.sha256 && build.sha256.length !== files)
      context.addIssue({
        code: "custom",
        path: ["sha256"],
        message: `${build.modelId} has ${files} file(s) and ${build.sha256.length} SHA-256 hash(es): give one per file, in shard order`,
      });
    if (split && split[1] !== "00001")
      context.addIssue({
        code: "custom",
        path: ["file"],
        message: `name the first shard (…-00001-of-${split[2]}.gguf), not shard ${split[1]}`,
      });
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
const upstreamSchema = z.strictObject({
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

const routingPolicies = ["local", "remote", "auto"] as const;
export type RoutingPolicy = (typeof routingPolicies)[number];

/** `chat`: a model that generates (every generation endpoint); `embedding`: one that embeds (`/v1/embeddings`) only. */
const modelKinds = ["chat", "embedding"] as const;
export type ModelKind = (typeof modelKinds)[number];

const modelEntrySchema = z.strictObject({
  id: z.string().min(1),
  kind: z.enum(modelKinds).default("chat"),
  /** An embedding model's vector size. */
  dimensions: z.number().int().positive().optional(),
  /**
   * The sizes an embedding model was trained to be cut to (Matryoshka), which `dimensions` may ask
   * for: its vector truncated and normalised again. Without them `dimensions` is refused.
   */
  matryoshkaDimensions: z.array(z.number().int().positive()).optional(),
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
  ...Object.fromEntries(
    Object.entries(modelEntrySchema.shape).map(([name, field]) => [
      name,
      (field instanceof z.ZodDefault ? field.unwrap() : field).optional(),
    ]),
  ),
  id: modelEntrySchema.shape.id,
}) as unknown as z.ZodType<Partial<ModelEntryInput> & { id: string }>;

/** An entry that can serve: a build unless it is remote-only, an upstream unless it is local-only. */
export const servableModelSchema = modelEntrySchema.superRefine((model, context) => {
  checkKind(model, context);
  if (model.routing !== "remote" && model.builds.length === 0 && model.gguf.length === 0) {
    context.addIssue({
      code: "custom",
      path: ["builds"],
      message: `${model.id} has routing '${model.routing}' but no build; give it MLC builds, GGUF builds or routing 'remote'`,
    });
  }
  if (model.routing !== "local" && model.upstreams.length === 0) {
    context.addIssue({
      code: "custom",
      path: ["upstreams"],
      message: `${model.id} has routing '${model.routing}' but no upstream`,
    });
  }
  model.upstreams.forEach((upstream, index) => {
    try {
      assertSecureUrl(upstream.baseUrl, `upstream URL of ${model.id}`);
    } catch (error) {
      context.addIssue({ code: "custom", path: ["upstreams", index, "baseUrl"], message: (error as Error).message });
    }
  });
});

/** What each kind asks of its entry: an embedding model says its size, and is priced per input token only. */
function checkKind(model: z.infer<typeof modelEntrySchema>, context: z.RefinementCtx): void {
  const issue = (path: string, message: string) => context.addIssue({ code: "custom", path: [path], message });
  if (model.kind === "chat") {
    if (model.dimensions !== undefined || model.matryoshkaDimensions !== undefined)
      issue("dimensions", `${model.id} is a chat model: dimensions belong to an embedding model (kind 'embedding')`);
    return;
  }
  if (model.dimensions === undefined)
    issue("dimensions", `${model.id} is an embedding model: give its vector size (dimensions)`);
  if (model.price.outputNanoUsdPerToken !== 0)
    issue("price", `${model.id} is an embedding model, priced per input token only: set outputNanoUsdPerToken to 0`);
  const past = model.matryoshkaDimensions?.find((size) => size > (model.dimensions ?? 0));
  if (past !== undefined)
    issue("matryoshkaDimensions", `${model.id} cannot be cut to ${past} dimensions: it has ${model.dimensions}`);
}

export type MlcBuild = z.infer<typeof mlcBuildSchema>;
export type GgufBuild = z.infer<typeof ggufBuildSchema>;
export type ModelEntry = z.infer<typeof modelEntrySchema>;
export type ModelEntryInput = z.input<typeof modelEntrySchema>;

/** Price per 1M tokens in USD, for display: nano-USD per token × 10⁶ / 10⁹. */
export function usdPerMillion(nanoUsdPerToken: number): number {
  return nanoUsdPerToken / 1_000;
}
