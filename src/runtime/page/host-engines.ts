/**
 * The engines a page hosts for the worker (`startInference({ pageEngine })`): web-llm for a
 * worker without WebGPU, and llama.cpp, which runs in a Worker that only a page can start. They
 * are loaded only by pages that host, so the page entry stays free of engines and tokenizers.
 */
import type { ResolvedConfig } from "../config/config.js";
import { createEngine } from "../config/engines.js";
import { LlamaCppEngine } from "../../engines/llamacpp/engine.js";
import type { Addressing } from "../../engines/llamacpp/runtime.js";
import { SetupError } from "../../core/errors/setup.js";
import { hostEngine } from "../../engines/page-hosted.js";
import type { Engine, LoadProgress } from "../../engines/contract.js";
import type { WebLlmModule } from "../../engines/webllm/engine.js";
import { fetchTokenizerSource, Tokenizers } from "../../prompt/tokenizer.js";

export interface PageEngineOptions {
  /** web-llm, for a worker without WebGPU: `await import('@mlc-ai/web-llm')`. */
  webllm?: WebLlmModule;
  /** Host llama.cpp (the library's own WebAssembly build, on the CPU) for the worker. */
  llamacpp?: boolean;
  /** The folder of the llama.cpp build. Default: `llamacpp/` beside the worker script, where the Vite plugin and `copy-assets` put it. */
  llamacppUrl?: string;
  /** llama.cpp's threads. Default: a thread per core (less one for the page past two cores) when the page is cross-origin isolated, else 1 (docs/engines.md, Threads). */
  threads?: number;
  /** llama.cpp's builds: by default wasm32 where a model fits in 4 GB, else Memory64; `wasm32` or `wasm64` pins one (docs/engines.md). */
  addressing?: Addressing;
  /** The longest one token's grammar step may take on llama.cpp, in ms (default 2,000); past it the request fails. */
  tokenBudgetMs?: number;
  /** How long an aborted llama.cpp generation may take to stop, in ms (default 3,000), before its Worker is stopped. */
  abortGraceMs?: number;
  onProgress?: (modelId: string, progress: LoadProgress) => void;
}

/** Serves the worker's engine calls from this page until the returned function is called. */
export function hostPageEngine(config: ResolvedConfig, scriptUrl: string, options: PageEngineOptions): () => void {
  const engines: Record<string, Engine> = {};
  const local = () => {
    const tokenizers = new Tokenizers(
      fetchTokenizerSource(config.artifacts.tokenizerBaseUrl ?? new URL("tokenizers/", scriptUrl).href),
    );
    return createEngine({ config, tokenizers, webllm: options.webllm, onProgress: options.onProgress });
  };
  if (config.engine === "deterministic") engines.deterministic = local();
  else if (options.webllm) engines.webllm = local();
  if ("wllama" in options)
    throw new SetupError(
      "invalid_option",
      "pageEngine.wllama is gone: the library ships its own llama.cpp build; pass pageEngine: { llamacpp: true }.",
    );
  if (options.llamacpp && config.engine !== "deterministic") {
    engines.llamacpp = new LlamaCppEngine({
      assetsUrl: options.llamacppUrl ?? new URL("llamacpp/", scriptUrl).href,
      ggufBaseUrl: config.artifacts.ggufBaseUrl ?? new URL("models/", scriptUrl).href,
      ...(config.memoryBudgetMB !== undefined ? { memoryBudgetMB: config.memoryBudgetMB } : {}),
      ...(options.threads !== undefined ? { threads: options.threads } : {}),
      ...(options.addressing !== undefined ? { addressing: options.addressing } : {}),
      ...(options.tokenBudgetMs !== undefined ? { tokenBudgetMs: options.tokenBudgetMs } : {}),
      ...(options.abortGraceMs !== undefined ? { abortGraceMs: options.abortGraceMs } : {}),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  }
  return hostEngine(engines);
}
