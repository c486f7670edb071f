/**
 * The Responses API's stored responses, in the origin's database: a later request continues one
 * (`previous_response_id`) or refers to one of its output items (`item_reference`, which the
 * Vercel AI SDK sends for every earlier assistant turn while `store` is on, its default). Each is
 * the account's own: another account's id is not found. Kept 30 days, as OpenAI keeps them; each
 * save deletes a few of the expired ones, so the work per request stays bounded.
 */
import { deleteExpired, removeKept, visible } from "./kept-records.js";
import type { PolicyDatabase, StoredResponseRecord } from "../policy/store.js";

export class StoredResponses {
  readonly #database: Promise<PolicyDatabase>;
  readonly #clock: () => number;

  constructor(options: { database: PolicyDatabase | Promise<PolicyDatabase>; clock: () => number }) {
    this.#database = Promise.resolve(options.database);
    this.#clock = options.clock;
  }

  /** Stores a response's conversation and output, in one transaction with the expired ones' deletion. */
  async save(record: Omit<StoredResponseRecord, "createdAt" | "itemIds">): Promise<void> {
    const database = await this.#database;
    const now = this.#clock();
    const transaction = database.transaction("responses", "readwrite");
    const itemIds = record.output.map((item) => (item as { id: string }).id);
    await transaction.store.put({ ...record, createdAt: now, itemIds });
    await deleteExpired(transaction.store.index("createdAt"), now);
    await transaction.done;
  }

  /** The account's response `id`, unexpired; undefined otherwise. */
  async response(accountId: string, id: string): Promise<StoredResponseRecord | undefined> {
    const record = await (await this.#database).get("responses", id);
    return this.#visible(record, accountId);
  }

  /** The account's output items of these ids, from unexpired responses, read in one transaction; one not found is absent. */
  async items(accountId: string, ids: ReadonlySet<string>): Promise<Map<string, unknown>> {
    const index = (await this.#database).transaction("responses").store.index("itemIds");
    const found = new Map<string, unknown>();
    await Promise.all(
      [...ids].map(async (id) => {
        const record = this.#visible(await index.get(id), accountId);
        const item = record?.output.find((each) => (each as { id: string }).id === id);
        if (item !== undefined) found.set(id, item);
      }),
    );
    return found;
  }

  /** Deletes the account's response `id`; whether there was one. */
  async remove(accountId: string, id: string): Promise<boolean> {
    return removeKept(await this.#database, "responses", accountId, id, this.#clock());
  }

  #visible(record: StoredResponseRecord | undefined, accountId: string): StoredResponseRecord | undefined {
    return visible(record, accountId, this.#clock());
  }
}
