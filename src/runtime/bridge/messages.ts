/** Messages a page sends the worker (configuration, model management); shared by both sides. */
import type { InferenceConfig, ResolvedConfig } from "../config/config.js";
import type { LoadProgress } from "../../engines/contract.js";

export const manageMessage = "webgpu-inference:manage";
export const configureMessage = "webgpu-inference:configure";

export interface ManageRequest {
  type: typeof manageMessage;
  action: "load" | "delete";
  modelId: string;
}

/** Progress while loading, then one final `ok`. */
export type ManageReply = { progress: LoadProgress } | { ok: true } | { ok: false; message: string };

/** The options a page's `startInference` was given; `baseUrl` only when it chose one. */
export interface ConfigureRequest {
  type: typeof configureMessage;
  options: Partial<InferenceConfig>;
}

/** The configuration the worker serves with, or why it refused the page's options. */
export type ConfigureReply = { ok: true; config: ResolvedConfig } | { ok: false; message: string };
