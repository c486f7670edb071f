/**
 * `webgpu-inference`: the page side, re-exported. `startInference` (src/page/start.ts) registers
 * the inference service worker, waits until it controls the page, and configures it.
 */
export { startInference } from "./page/start.js";
export type { InferenceHandle, StartInferenceOptions } from "./page/start.js";
export { assertSecureUrl } from "./model/secure-url.js";
export type { InferenceConfig, ResolvedConfig } from "./config/config.js";
export type { PageEngineOptions } from "./page/host-engines.js";
export { ApiError } from "./errors/api.js";
export { SetupError, type SetupErrorCode } from "./errors/setup.js";
export type { Admin } from "./policy/admin.js";
export type { Account, ApiKeyInfo, CreatedKey, LedgerQuery } from "./policy/admin.js";
export type { LedgerEntry, StorageAmount, StoredKind } from "./policy/store.js";
export type { StorageReport } from "./policy/storage.js";
export type { LoadProgress } from "./engine/contract.js";
export { seedCatalogue } from "./model/seed.js";
export type { GgufBuild, ModelEntry, ModelEntryInput, MlcBuild } from "./model/entry.js";
