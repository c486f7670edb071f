/**
 * `webgpu-inference/sw`: the service-worker side, re-exported. `installInference`
 * (src/worker/install.ts) wires the catalogue, tokenizers, engine, queue and HTTP surface together.
 */
export { createAdmin, createInference, installInference, manageModel } from "./worker/install.js";
export type { Environment, InferenceWorker, InstallOptions, InstalledInference } from "./worker/install.js";
export type { Account, ApiKeyInfo, CreatedKey, LedgerQuery } from "./policy/admin.js";
export type { StorageReport } from "./policy/storage.js";
export type { InferenceConfig } from "./config/config.js";
export { SetupError, type SetupErrorCode } from "./errors/setup.js";
