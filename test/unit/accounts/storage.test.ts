/**
 * Stored data is bounded, owned and counted: each account's quota, checked in the write's own
 * transaction; room kept in the origin for billing; continuations stored by reference; listings
 * read through an index; and a stored conversation read only as far back as a window holds.
 */
import { openDB } from "idb";
import { describe, expect, it, vi } from "vitest";
import { openAccountsDatabase } from "../../../src/accounts/database.js";
import { responseSchema } from "../../../src/core/wire/response.js";
import { makeApp, readJsonAt, type TestApp } from "../../support/unit-app.js";

const model = "alpha3:8b-instruct-q8_0";
const post = (body: unknown): RequestInit => ({ method: "POST", body: JSON.stringify(body) });

/** A conversation's new items: `count` user messages of `characters` each. */
const items = (count: number, characters: number) =>
  Array.from({ length: count }, (_, index) => ({ role: "user", content: `${index} ${"x".repeat(characters)}` }));

async function conversation(test: TestApp, key = test.key): Promise<string> {
  return ((await readJsonAt(test, "/conversations", post({}), key)) as { id: string }).id;
}

/** A second account with a key, on the same device. */
async function otherAccount(test: TestApp, creditUsd = 10) {
  const account = await test.admin.createAccount({ name: "other", creditUsd });
  return { accountId: account.id, key: (await test.admin.createKey({ accountId: account.id })).key };
}

describe("each account's stored data", () => {
  it("is refused past its quota, with nothing half-written, and another account is served meanwhile", async () => {
    const test = await makeApp({ creditUsd: 0 });
    await test.admin.setStorageQuota(test.accountId, { bytes: 200_000 });
    const id = await conversation(test);
    const statuses: number[] = [];
    for (let round = 0; round < 8; round++) {
      const answer = await readJsonAt(test, `/conversations/${id}/items`, post({ items: items(20, 2_000) }));
      statuses.push((answer as { status?: number }).status ?? 200);
    }
    // About 40 kB a round: four fit in 200 kB; the fifth and later are refused whole.
    expect(statuses).toEqual([200, 200, 200, 200, 403, 403, 403, 403]);
    const refused = await readJsonAt(test, `/conversations/${id}/items`, post({ items: items(20, 2_000) }));
    expect(refused).toMatchObject({ status: 403, type: "insufficient_quota", code: "storage_quota_exceeded" });
    expect((refused as { message: string }).message).toMatch(/stores 0\.\d+ MB of 0\.200 MB .*admin\.setStorageQuota/);
    const usage = await test.admin.storageUsage(test.accountId);
    expect(usage).toMatchObject({ items: 81, quota: { bytes: 200_000, items: 100_000 } });
    expect(usage.kinds.conversations.items).toBe(81);
    expect(usage.bytes).toBeLessThanOrEqual(200_000);
    const listed = (await readJsonAt(test, `/conversations/${id}/items?limit=100`)) as { data: unknown[] };
    expect(listed.data).toHaveLength(80);
    // Another account chats and stores as before.
    const other = await otherAccount(test);
    const chat = await readJsonAt(
      test,
      "/chat/completions",
      post({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, store: true }),
      other.key,
    );
    expect(chat).toMatchObject({ object: "chat.completion" });
    expect((await test.admin.storageUsage(other.accountId)).kinds.completions.items).toBe(1);
  });

  it("a request that would store past the quota is refused before it is generated or billed", async () => {
    const test = await makeApp();
    await test.admin.setStorageQuota(test.accountId, { bytes: 10_000 });
    const input = "y".repeat(20_000);
    const responses = await readJsonAt(test, "/responses", post({ model, input, max_output_tokens: 16 }));
    expect(responses).toMatchObject({ status: 403, code: "storage_quota_exceeded" });
    const chat = await readJsonAt(
      test,
      "/chat/completions",
      post({ model, messages: [{ role: "user", content: input }], max_tokens: 4, store: true }),
    );
    expect(chat).toMatchObject({ status: 403, code: "storage_quota_exceeded" });
    // Not stored, the same request is served.
    const unstored = await readJsonAt(test, "/responses", post({ model, input, max_output_tokens: 16, store: false }));
    expect(unstored).toMatchObject({ object: "response", store: false });
    expect(await test.admin.ledger({ accountId: test.accountId })).toHaveLength(2);
  });

  it("is reported a line per kind, given back exactly when deleted, and deleted whole by the admin", async () => {
    const test = await makeApp();
    const first = responseSchema.parse(
      await readJsonAt(test, "/responses", post({ model, input: "Hello", max_output_tokens: 16 })),
    );
    await readJsonAt(
      test,
      "/chat/completions",
      post({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, store: true, metadata: { a: "1" } }),
    );
    const id = await conversation(test);
    await readJsonAt(test, `/conversations/${id}/items`, post({ items: items(3, 100) }));
    const usage = await test.admin.storageUsage(test.accountId);
    expect(usage.kinds.responses.items).toBe(1);
    expect(usage.kinds.completions.items).toBe(1);
    expect(usage.kinds.conversations.items).toBe(4);
    expect(usage.items).toBe(6);
    expect(usage.bytes).toBe(
      usage.kinds.responses.bytes + usage.kinds.completions.bytes + usage.kinds.conversations.bytes,
    );
    // Deleting gives back exactly what was counted.
    const item = ((await readJsonAt(test, `/conversations/${id}/items`)) as { data: { id: string }[] }).data[0]!;
    await readJsonAt(test, `/conversations/${id}/items/${item.id}`, { method: "DELETE" });
    await readJsonAt(test, `/responses/${first.id}`, { method: "DELETE" });
    const after = await test.admin.storageUsage(test.accountId);
    expect(after.kinds.responses).toEqual({ bytes: 0, items: 0 });
    expect(after.kinds.conversations.items).toBe(3);
    await readJsonAt(test, `/conversations/${id}`, { method: "DELETE" });
    expect((await test.admin.storageUsage(test.accountId)).kinds.conversations).toEqual({ bytes: 0, items: 0 });
    // The admin's deletion takes the rest, and another account's data stays.
    const other = await otherAccount(test);
    await conversation(test, other.key);
    const freed = await test.admin.deleteStoredData(test.accountId);
    expect(freed.items).toBe(1);
    expect(await test.admin.storageUsage(test.accountId)).toMatchObject({ bytes: 0, items: 0 });
    expect((await test.admin.storageUsage(other.accountId)).items).toBe(1);
    expect(await readJsonAt(test, "/chat/completions")).toMatchObject({ data: [] });
  });

  it("keeps room in the origin for billing: a stored write is a 507 near the quota, while admission still writes", async () => {
    const full = { usage: 1_000_000_000 - 40 * 2 ** 20, quota: 1_000_000_000 };
    const test = await makeApp({ estimate: async () => full });
    const stored = await readJsonAt(test, "/conversations", post({ items: items(1, 10) }));
    expect(stored).toMatchObject({ status: 507, code: "storage_full" });
    expect((stored as { message: string }).message).toContain("kept free for billing");
    const chat = await readJsonAt(test, "/chat/completions", post({ model, messages: items(1, 10), max_tokens: 4 }));
    expect(chat).toMatchObject({ object: "chat.completion" });
    expect(await test.admin.storageUsage(test.accountId)).toMatchObject({ items: 0 });
  });

  it("keeps only what is read: an earlier reply's annotations, log probabilities and parsed value are not stored", async () => {
    const test = await makeApp();
    const reply = {
      role: "assistant",
      content: [{ type: "output_text", text: "Hi", annotations: [{ big: "a".repeat(5_000) }], logprobs: [1, 2] }],
      phase: "final_answer",
    };
    const id = await conversation(test);
    await readJsonAt(test, `/conversations/${id}/items`, post({ items: [reply] }));
    await readJsonAt(
      test,
      "/chat/completions",
      post({
        model,
        store: true,
        max_tokens: 4,
        messages: [
          { role: "user", content: "Hi" },
          { role: "assistant", content: "Hi", parsed: { big: "b".repeat(5_000) }, refusal: null, annotations: [] },
          { role: "user", content: "Again" },
        ],
      }),
    );
    const stored = JSON.stringify([
      await test.database.getAll("conversationItems"),
      await test.database.getAll("completions"),
    ]);
    expect(stored).not.toContain("aaaaa");
    expect(stored).not.toContain("bbbbb");
    expect(stored).not.toContain("final_answer");
    expect((await test.admin.storageUsage(test.accountId)).bytes).toBeLessThan(4_000);
  });
});

describe("continuations", () => {
  it("a chain of previous_response_id is stored once: what it keeps grows with the turns, not their square", async () => {
    const test = await makeApp();
    // About 2 kB and 330 tokens a turn: twelve fit the window together.
    const turn = "hello ".repeat(330);
    let previous: string | undefined;
    const sizes: number[] = [];
    for (let index = 0; index < 12; index++) {
      const response = responseSchema.parse(
        await readJsonAt(
          test,
          "/responses",
          post({ model, input: `${index} ${turn}`, max_output_tokens: 16, previous_response_id: previous }),
        ),
      );
      previous = response.id;
      sizes.push((await test.admin.storageUsage(test.accountId)).bytes);
    }
    const added = sizes.map((size, index) => size - (sizes[index - 1] ?? 0));
    // Each turn adds its own 2 kB and its answer, the twelfth as the first: copies would add 2 kB more each turn.
    expect(Math.max(...added)).toBeLessThan(Math.min(...added) * 1.2);
    expect(sizes.at(-1)).toBeLessThan(12 * 4_000);
    // Continued and listed as before: every turn, in order.
    const listed = (await readJsonAt(test, `/responses/${previous}/input_items?order=asc&limit=100`)) as {
      data: { type: string; content?: { text: string }[] }[];
    };
    expect(listed.data).toHaveLength(23);
    expect(listed.data.filter((item) => item.content?.[0]?.text.endsWith(turn))).toHaveLength(12);
  });

  it("a continuation of a deleted response reads the chain up to the gap", async () => {
    const test = await makeApp();
    const ask = async (input: string, previous?: string) =>
      responseSchema.parse(
        await readJsonAt(
          test,
          "/responses",
          post({ model, input, max_output_tokens: 16, previous_response_id: previous }),
        ),
      );
    const first = await ask("one");
    const second = await ask("two", first.id);
    const third = await ask("three", second.id);
    await readJsonAt(test, `/responses/${second.id}`, { method: "DELETE" });
    const listed = (await readJsonAt(test, `/responses/${third.id}/input_items?order=asc`)) as {
      data: { content?: { text: string }[] }[];
    };
    expect(listed.data.map((item) => item.content?.[0]?.text)).toEqual(["three"]);
  });
});

describe("reading a stored conversation", () => {
  it("goes back only as far as the window holds: a refusal costs the same at 1,000 items as at 4,000", async () => {
    const test = await makeApp({ rpm: 1_000 });
    const measure = async (count: number) => {
      const id = await conversation(test);
      for (let added = 0; added < count; added += 20)
        await readJsonAt(test, `/conversations/${id}/items`, post({ items: items(20, 2_000) }));
      // Items are read from the end a batch (a cursor) at a time.
      const cursors = vi.spyOn(IDBObjectStore.prototype, "openCursor");
      try {
        const refused = await readJsonAt(test, "/responses", post({ model, conversation: id, input: "And?" }));
        expect(refused).toMatchObject({ status: 400, code: "context_length_exceeded", param: "input" });
        return cursors.mock.calls.length;
      } finally {
        cursors.mockRestore();
      }
    };
    const [fewer, more] = [await measure(1_000), await measure(4_000)];
    expect(more).toBe(fewer);
    // 2,000 characters are at least 16 tokens of this tokenizer: 513 items pass the window of 8,192, in 9 batches.
    expect(more).toBeLessThanOrEqual(9);
  }, 60_000);
});

describe("listing stored chat completions", () => {
  it("reads the listing index: filters by model and metadata, in order, after a cursor, skipping the expired", async () => {
    const test = await makeApp();
    const store = (metadata: Record<string, string>, modelId = model) =>
      readJsonAt(
        test,
        "/chat/completions",
        post({ model: modelId, messages: [{ role: "user", content: "Hi" }], max_tokens: 1, store: true, metadata }),
      ) as Promise<{ id: string }>;
    const made: { id: string; metadata: Record<string, string>; model: string }[] = [];
    for (let index = 0; index < 30; index++) {
      test.clock.now += 1_000;
      const metadata = { team: index % 3 === 0 ? "red" : "blue", tier: index % 2 === 0 ? "gold" : "free" };
      const modelId = index % 5 === 0 ? "gamma-7b-instruct-v0.3" : model;
      made.push({ id: (await store(metadata, modelId)).id, metadata, model: modelId });
    }
    const ids = async (query: string) =>
      ((await readJsonAt(test, `/chat/completions${query}`)) as { data: { id: string }[] }).data.map(({ id }) => id);
    const expected = made.filter((each) => each.metadata.team === "red" && each.metadata.tier === "gold");
    expect(await ids("?metadata[team]=red&metadata[tier]=gold&limit=100")).toEqual(expected.map(({ id }) => id));
    const gamma = made.filter((each) => each.model === "gamma-7b-instruct-v0.3" && each.metadata.tier === "gold");
    expect(await ids("?model=gamma-7b-instruct-v0.3&metadata[tier]=gold&order=desc")).toEqual(
      gamma.map(({ id }) => id).reverse(),
    );
    expect(await ids(`?metadata[team]=red&limit=2&after=${expected[0]!.id}`)).toEqual(
      made
        .filter((each) => each.metadata.team === "red")
        .slice(1, 3)
        .map(({ id }) => id),
    );
    // A page reads the records on it and no other.
    const getSpy = vi.spyOn(IDBObjectStore.prototype, "get");
    const cursorSpy = vi.spyOn(IDBIndex.prototype, "openCursor");
    try {
      expect(await ids("?metadata[team]=red&metadata[tier]=free&limit=1")).toHaveLength(1);
      expect(cursorSpy).not.toHaveBeenCalled();
      expect(getSpy.mock.calls.length).toBeLessThanOrEqual(1);
    } finally {
      getSpy.mockRestore();
      cursorSpy.mockRestore();
    }
    // Past 30 days the first ones are gone from the list.
    test.clock.now += 30 * 24 * 60 * 60 * 1000 - 9_500;
    expect((await ids("?limit=100")).length).toBe(10);
  });
});

describe("the database's upgrade", () => {
  it("counts what an earlier version stored, and lists its completions through the new index", async () => {
    const name = `upgrade-${Math.random()}`;
    const old = await openDB(name, 5, {
      upgrade(database) {
        database.createObjectStore("accounts", { keyPath: "id" });
        const keys = database.createObjectStore("keys", { keyPath: "id" });
        keys.createIndex("hash", "hash", { unique: true });
        keys.createIndex("accountId", "accountId");
        const ledger = database.createObjectStore("ledger", { keyPath: "seq", autoIncrement: true });
        for (const index of ["id", "accountId", "keyId", "createdAt"])
          ledger.createIndex(index, index, { unique: index === "id" });
        database.createObjectStore("reservations", { keyPath: "requestId" }).createIndex("holder", "holder");
        database.createObjectStore("windows", { keyPath: "keyId" });
        database.createObjectStore("upstreamCredentials", { keyPath: "name" });
        const responses = database.createObjectStore("responses", { keyPath: "id" });
        responses.createIndex("itemIds", "itemIds", { multiEntry: true });
        responses.createIndex("createdAt", "createdAt");
        const completions = database.createObjectStore("completions", { keyPath: "id" });
        completions.createIndex("createdAt", "createdAt");
        completions.createIndex("account", ["accountId", "createdAt", "id"]);
        database.createObjectStore("conversations", { keyPath: "id" });
        const conversationItems = database.createObjectStore("conversationItems", {
          keyPath: ["conversationId", "place"],
        });
        conversationItems.createIndex("id", ["conversationId", "item.id"], { unique: true });
      },
    });
    const now = Date.now();
    await old.put("completions", {
      id: "chatcmpl-old",
      accountId: "acct_old",
      createdAt: now,
      model,
      metadata: { a: "1" },
      completion: { id: "chatcmpl-old" },
      messages: [{ role: "user", content: "Hi" }],
    });
    await old.put("conversations", {
      id: "conv_old",
      accountId: "acct_old",
      createdAt: now,
      metadata: {},
      nextPlace: 1,
    });
    await old.put("conversationItems", {
      conversationId: "conv_old",
      place: 0,
      item: { id: "msg_1", role: "user", content: "Hi" },
    });
    old.close();
    const database = await openAccountsDatabase(name);
    const usage = await database.get("storage", "acct_old");
    expect(usage?.kinds.completions.items).toBe(1);
    expect(usage?.kinds.conversations.items).toBe(2);
    expect(usage?.kinds.conversations.bytes).toBe((await database.get("conversations", "conv_old"))?.bytes);
    const listed = await database.getAllKeysFromIndex("completions", "listing", [
      "acct_old",
      "metadata\u0000a\u00001",
      now,
      "chatcmpl-old",
    ]);
    expect(listed).toEqual(["chatcmpl-old"]);
  });
});
