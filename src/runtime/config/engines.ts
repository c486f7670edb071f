/**
 * Builds the configured engine. The worker and a page that hosts the engine both use it, so an
 * engine is the same wherever it runs.
 */
import type { ResolvedConfig } from "./config.js";
import type { Tokenizers } from "../../prompt/tokenizer.js";
import { DeterministicEngine } from "../../engines/deterministic/engine.js";
import type { Engine, LoadProgress } from "../../engines/contract.js";
import { WebLlmEngine, type WebLlmModule } from "../../engines/webllm/engine.js";
import { SetupError } from "../../core/errors/setup.js";

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
