/**
 * `webgpu-inference/sw`: the service-worker side, re-exported. `installInference`
 * (src/runtime/worker/install.ts) wires the catalogue, tokenizers, engine, queue and HTTP surface together.
 */
export { createAdmin, createInference, installInference, manageModel } from "./runtime/worker/install.js";
export type { Environment, InferenceWorker, InstallOptions, InstalledInference } from "./runtime/worker/install.js";
export type { Account, ApiKeyInfo, CreatedKey, LedgerQuery } from "./accounts/admin.js";
export type { StorageReport } from "./accounts/storage.js";
export type { InferenceConfig } from "./runtime/config/config.js";
export { SetupError, type SetupErrorCode } from "./core/errors/setup.js";
