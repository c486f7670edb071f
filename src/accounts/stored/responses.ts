/**
 * The Responses API's stored responses, in the origin's database: a later request continues one
 * (`previous_response_id`) or refers to one of its output items (`item_reference`, which the
 * Vercel AI SDK sends for every earlier assistant turn while `store` is on, its default). Each is
 * the account's own: another account's id is not found. Kept 30 days, as OpenAI keeps them; each
 * save deletes a few of the expired ones, so the work per request stays bounded.
 *
 * A continuation is stored as its own items and the id of the response it continued: a chain
 * grows by what each turn adds, and is read back from its end, a response at a time, only as far
 * as the reader needs (a context window's worth).
 */
import { jsonBytes } from "../json-bytes.js";
import { countStored } from "../storage.js";
import type { StoredResponseRecord } from "../database.js";
import { committed, deleteExpired, KeptRecordStore, removeKept, visible } from "./kept-records.js";

export class StoredResponses extends KeptRecordStore {
  /**
   * Stores a response, counted against its account's quota (403 past it, 507 when the origin
   * is nearly full), in one transaction with the expired ones' deletion.
   */
  async save(record: Omit<StoredResponseRecord, "createdAt" | "itemIds" | "bytes">): Promise<void> {
    const database = await this.database;
    const now = this.clock();
    const itemIds = record.output.map((item) => (item as { id: string }).id);
    const stored: StoredResponseRecord = { ...record, createdAt: now, itemIds, bytes: 0 };
    stored.bytes = jsonBytes(stored);
    await this.storage.ensureOriginRoom(stored.bytes);
    const transaction = database.transaction(["responses", "storage"], "readwrite");
    await committed(transaction, async () => {
      const usage = transaction.objectStore("storage");
      await countStored(usage, record.accountId, "responses", { bytes: stored.bytes, items: 1 });
      await transaction.objectStore("responses").put(stored);
      await deleteExpired(transaction.objectStore("responses").index("createdAt"), usage, "responses", now);
    });
  }

  /** The account's response `id`, unexpired; undefined otherwise. */
  async response(accountId: string, id: string): Promise<StoredResponseRecord | undefined> {
    const record = await (await this.database).get("responses", id);
    return this.#visible(record, accountId);
  }

  /**
   * The items of a stored response's conversation, newest first: its output (unless
   * `ownOutput` is false), then what it was answered over, reading the responses it continued one
   * at a time as the caller asks for more. Output items come as `fromOutput` makes them (the
   * input items they are in a later request). A response deleted or expired ends the chain there.
   */
  async *itemsFromEnd(
    record: StoredResponseRecord,
    ownOutput: boolean,
    fromOutput: (item: unknown) => unknown,
  ): AsyncGenerator<unknown> {
    let current: StoredResponseRecord | undefined = record;
    let wanted = Infinity;
    for (let first = true; current && wanted > 0; first = false) {
      const output = first && !ownOutput ? [] : current.output;
      for (let index = output.length - 1; index >= 0 && wanted > 0; index--, wanted--) yield fromOutput(output[index]);
      // Its conversation is the last `length` of (the previous one's conversation and output, then its own input).
      const length = current.conversationLength ?? current.input.length;
      const own = Math.min(length, current.input.length);
      for (let index = current.input.length - 1; index >= current.input.length - own && wanted > 0; index--, wanted--)
        yield current.input[index];
      wanted = Math.min(wanted, length - own);
      const previous: string | null | undefined = wanted > 0 ? current.previousResponseId : null;
      current = previous ? await this.response(current.accountId, previous) : undefined;
    }
  }

  /** The account's output items of these ids, from unexpired responses, read in one transaction; one not found is absent. */
  async items(accountId: string, ids: ReadonlySet<string>): Promise<Map<string, unknown>> {
    const index = (await this.database).transaction("responses").store.index("itemIds");
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
    return removeKept(await this.database, "responses", accountId, id, this.clock());
  }

  #visible(record: StoredResponseRecord | undefined, accountId: string): StoredResponseRecord | undefined {
    return visible(record, accountId, this.clock());
  }
}
