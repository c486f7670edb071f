/**
 * Which build of a model this device can run: the adapter's features and the memory each
 * build needs (web-llm's figures for MLC builds, weights plus KV cache for GGUF builds).
 */
import type { GgufBuild, MlcBuild, ModelEntry } from "./entry.js";

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
  /** What bounds `memoryBudgetMB` when the device's memory does not: an engine's address space. */
  memoryLimit?: string;
  /** The CPU threads llama.cpp runs on here (several only in a cross-origin isolated page). */
  threads?: number;
}

/** The context window web-llm's `vram_required_MB` figures assume. */
const memoryReferenceWindow = 4_096;

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
  if (model.builds.length === 0)
    return {
      ok: false,
      reason: `${model.id} has no build for this device's engine; it is served remotely`,
      build: null,
    };
  if (!device.webgpu) return { ok: false, reason: "WebGPU is not available in this browser", build: null };
  const usable = model.builds.find((build) => build.requiredFeatures.every((feature) => device.features.has(feature)));
  if (!usable) {
    const missing = [...new Set(model.builds.flatMap((build) => build.requiredFeatures))].filter(
      (feature) => !device.features.has(feature),
    );
    return {
      ok: false,
      reason: `every build of ${model.id} needs WebGPU feature(s) this adapter lacks: ${missing.join(", ")}`,
      build: null,
    };
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
export function chooseGgufBuild(
  model: ModelEntry,
  { memoryBudgetMB, memoryLimit }: Pick<DeviceFeatures, "memoryBudgetMB" | "memoryLimit">,
): GgufChoice {
  if (model.gguf.length === 0) return { ok: false, reason: `${model.id} has no GGUF build for llama.cpp`, build: null };
  const fitting = model.gguf.find(
    (build) => memoryBudgetMB === undefined || ggufMemoryEstimateMB(model, build) <= memoryBudgetMB,
  );
  if (fitting) return { ok: true, build: fitting };
  const smallest = model.gguf.reduce((best, build) =>
    ggufMemoryEstimateMB(model, build) < ggufMemoryEstimateMB(model, best) ? build : best,
  );
  return {
    ok: false,
    reason: `${smallest.modelId} needs about ${Math.round(ggufMemoryEstimateMB(model, smallest))} MB of memory at its ${model.contextWindow}-token context window; this device offers about ${Math.round(memoryBudgetMB ?? 0)} MB (${memoryLimit ?? "set `memoryBudgetMB` if it has more"})`,
    build: smallest,
  };
}
