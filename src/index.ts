/**
 * `webgpu-inference`: the page side, re-exported. `startInference` (src/runtime/page/start.ts) registers
 * the inference service worker, waits until it controls the page, and configures it.
 */
export { startInference } from "./runtime/page/start.js";
export type { InferenceHandle, StartInferenceOptions } from "./runtime/page/start.js";
export { assertSecureUrl } from "./core/secure-url.js";
export type { InferenceConfig, ResolvedConfig } from "./runtime/config/config.js";
export type { PageEngineOptions } from "./runtime/page/host-engines.js";
export { ApiError } from "./core/errors/api.js";
export { SetupError, type SetupErrorCode } from "./core/errors/setup.js";
export type { Admin } from "./accounts/admin.js";
export type { Account, ApiKeyInfo, CreatedKey, LedgerQuery } from "./accounts/admin.js";
export type { LedgerEntry, StorageAmount, StoredKind } from "./accounts/database.js";
export type { StorageReport } from "./accounts/storage.js";
export type { LoadProgress } from "./engines/contract.js";
export { seedCatalogue } from "./catalogue/seed.js";
export type { GgufBuild, ModelEntry, ModelEntryInput, MlcBuild } from "./catalogue/entry.js";
