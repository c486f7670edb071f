/** What an account stores through the API, wired over one database and one quota, and the seal of what it is handed back. */
import { AccountStorage, type StorageEstimator } from "../policy/storage.js";
import type { PolicyDatabase } from "../policy/store.js";
import { Conversations } from "./conversations.js";
import { StoredCompletions } from "./stored-completions.js";
import { Sealing } from "./sealing.js";
import { StoredResponses } from "./stored-responses.js";

export function storedData(options: {
  database: PolicyDatabase | Promise<PolicyDatabase>;
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
    sealing: new Sealing({ database }),
  };
}
