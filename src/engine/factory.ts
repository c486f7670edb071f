/**
 * Builds the configured engine. The worker and a page that hosts the engine both use it, so an
 * engine is the same wherever it runs.
 */
import type { ResolvedConfig } from "../config/config.js";
import type { Tokenizers } from "../model/tokenizer.js";
import { DeterministicEngine } from "./deterministic.js";
import type { Engine, LoadProgress } from "./contract.js";
import { WebLlmEngine, type WebLlmModule } from "./webllm.js";
import { SetupError } from "../errors/setup.js";

export interface EngineFactoryOptions {
  config: ResolvedConfig;
  tokenizers: Tokenizers;
  webllm?: WebLlmModule | undefined;
  onProgress?: ((modelId: string, progress: LoadProgress) => void) | undefined;
}

export function createEngine({ config, tokenizers, webllm, onProgress }: EngineFactoryOptions): Engine {
  if (config.engine === "deterministic") {
    return new DeterministicEngine({
      tokenizers,
      ...(config.tokenDelayMs !== undefined ? { tokenDelayMs: config.tokenDelayMs } : {}),
    });
  }
  if (!webllm)
    throw new SetupError(
      "missing_module",
      "engine 'webllm' needs the web-llm module: pass { webllm } (import * as webllm from '@mlc-ai/web-llm').",
    );
  return new WebLlmEngine({
    webllm,
    ...(config.artifacts.modelBaseUrl ? { modelBaseUrl: config.artifacts.modelBaseUrl } : {}),
    ...(config.artifacts.modelLibBaseUrl ? { modelLibBaseUrl: config.artifacts.modelLibBaseUrl } : {}),
    ...(config.memoryBudgetMB !== undefined ? { memoryBudgetMB: config.memoryBudgetMB } : {}),
    ...(onProgress ? { onProgress } : {}),
  });
}
