/**
 * The engine a page hosts for a worker without WebGPU (`startInference({ pageEngine })`). It is
 * loaded only by pages that host, so the page entry stays free of engines and tokenizers.
 */
import type { ResolvedConfig } from "./config.js";
import { createEngine } from "./engine/factory.js";
import { hostEngine } from "./engine/page-hosted.js";
import type { LoadProgress } from "./engine/types.js";
import type { WebLlmModule } from "./engine/webllm.js";
import { fetchTokenizerSource, Tokenizers } from "./tokenizer.js";

export interface PageEngineOptions {
  webllm?: WebLlmModule;
  onProgress?: (modelId: string, progress: LoadProgress) => void;
}

/** Serves the worker's engine calls from this page until the returned function is called. */
export function hostPageEngine(config: ResolvedConfig, scriptUrl: string, options: PageEngineOptions): () => void {
  const tokenizers = new Tokenizers(fetchTokenizerSource(config.artifacts.tokenizerBaseUrl ?? new URL("tokenizers/", scriptUrl).href));
  return hostEngine(createEngine({ config, tokenizers, webllm: options.webllm, onProgress: options.onProgress }));
}
