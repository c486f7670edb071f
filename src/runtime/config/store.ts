/**
 * Where the ready-made worker keeps the configuration a page gave it, so a worker the browser
 * stopped and restarts serves the same way without asking. One record per registration scope.
 */
import { openDB, type DBSchema } from "idb";
import type { InferenceConfig } from "./config.js";

interface ConfigSchema extends DBSchema {
  configs: { key: string; value: { scope: string; config: InferenceConfig } };
}

const configDatabaseName = "webgpu-inference-config";

export interface ConfigStore {
  read(scope: string): Promise<InferenceConfig | undefined>;
  write(scope: string, config: InferenceConfig): Promise<void>;
}

export function openConfigStore(name = configDatabaseName): ConfigStore {
  const database = openDB<ConfigSchema>(name, 1, {
    upgrade(db) {
      db.createObjectStore("configs", { keyPath: "scope" });
    },
  });
  return {
    read: async (scope) => (await (await database).get("configs", scope))?.config,
    write: async (scope, config) => void (await (await database).put("configs", { scope, config })),
  };
}
