/** What an account stores through the API, wired over one database and one quota, and the seal of what it is handed back. */
import type { StorageEstimator } from "../../core/storage-room.js";
import { AccountStorage } from "../storage.js";
import type { AccountsDatabase } from "../database.js";
import { Conversations } from "./conversations.js";
import { StoredFiles } from "./files.js";
import { StoredVectorStores } from "./vector-stores.js";
import { StoredCompletions } from "./completions.js";
import { Sealing } from "./sealing.js";
import { StoredResponses } from "./responses.js";

export function storedData(options: {
  database: AccountsDatabase | Promise<AccountsDatabase>;
  clock: () => number;
  /** The origin's storage estimate (`navigator.storage.estimate`), for the room billing keeps. */
  estimate?: StorageEstimator | undefined;
}) {
  const { database, clock } = options;
  const storage = new AccountStorage({ database, estimate: options.estimate });
  return {
    storage,
    responses: new StoredResponses({ database, clock, storage }),
    completions: new StoredCompletions({ database, clock, storage }),
    conversations: new Conversations({ database, storage }),
    files: new StoredFiles({ database, clock, storage }),
    vectorStores: new StoredVectorStores({ database, clock, storage }),
    sealing: new Sealing({ database }),
  };
}
