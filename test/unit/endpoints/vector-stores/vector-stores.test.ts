/**
 * OpenAI's vector stores through openai-node unchanged, on the deterministic engine: files
 * uploaded, indexed in the background and billed, searched by meaning and words with filters,
 * their chunks read back, and deleted with their space given back; another account sees none of
 * it, and a worker that restarts mid-indexing finishes the job.
 */
import OpenAI, { toFile } from "openai";
import { describe, expect, it } from "vitest";
import {
  fileBatchSchema,
  fileContentPageSchema,
  searchResultsPageSchema,
  vectorStoreDeletedSchema,
  vectorStoreFileDeletedSchema,
  vectorStoreFileListSchema,
  vectorStoreFileSchema,
  vectorStoreListSchema,
  vectorStoreSchema,
} from "../../../../src/core/wire/vector-stores.js";
import type { Engine } from "../../../../src/engines/contract.js";
import { DeterministicEngine } from "../../../../src/engines/deterministic/engine.js";
import { checkLedgerInvariant, makeApp, readJsonAt, tokenizers, type TestApp } from "../../../support/unit-app.js";

const baseURL = "https://app.example/openai/v1";

function client(test: TestApp, apiKey = test.key) {
  const fetch = async (input: string | URL | Request, init?: RequestInit) => test.app.handle(new Request(input, init));
  return new OpenAI({ baseURL, apiKey, fetch: fetch as typeof globalThis.fetch, maxRetries: 0 });
}

const manual = [
  "# Kettle manual",
  "",
  "To descale the kettle, fill it with water and white vinegar, boil, and rinse twice.",
  "",
  "The warranty covers the heating element for two years from the date of purchase.",
].join("\n");

const recipes = "Bread needs flour, water, salt and yeast. Knead the dough for ten minutes, then let it rise.";

async function indexed(openai: OpenAI, storeId: string, fileId: string) {
  return openai.vectorStores.files.poll(storeId, fileId, { pollIntervalMs: 5 });
}

describe("vector stores", () => {
  it("openai-node uploads, indexes, searches and deletes, billing each embedding", async () => {
    const test = await makeApp();
    const openai = client(test);
    const file = await openai.files.create({
      file: await toFile(Buffer.from(manual), "kettle.md"),
      purpose: "assistants",
    });
    const store = await openai.vectorStores.create({
      name: "Manuals",
      file_ids: [file.id],
      metadata: { team: "home" },
    });
    expect(vectorStoreSchema.parse(store)).toMatchObject({
      object: "vector_store",
      name: "Manuals",
      status: "in_progress",
      file_counts: { in_progress: 1, completed: 0, failed: 0, cancelled: 0, total: 1 },
      metadata: { team: "home" },
      embedding_model: "snowflake-arctic-embed-s",
    });
    expect(store.id).toMatch(/^vs_/);
    const done = await indexed(openai, store.id, file.id);
    expect(vectorStoreFileSchema.parse(done)).toMatchObject({
      id: file.id,
      status: "completed",
      last_error: null,
      chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 384, chunk_overlap_tokens: 192 } },
    });
    expect(done.usage_bytes).toBeGreaterThan(manual.length);
    // How far indexing came, in this API's own field: the chunks, and the tokens billed for them.
    const [indexing] = (await test.admin.ledger({ accountId: test.accountId })).filter(
      (entry) => entry.kind === "charge",
    );
    expect(vectorStoreFileSchema.parse(done).indexing).toEqual({
      chunks: 1,
      embedded_chunks: 1,
      embedded_tokens: indexing!.promptTokens,
    });
    const second = await openai.vectorStores.files.uploadAndPoll(
      store.id,
      await toFile(Buffer.from(recipes), "bread.txt"),
      {
        pollIntervalMs: 5,
      },
    );
    expect(second.status).toBe("completed");
    const after = await openai.vectorStores.retrieve(store.id);
    expect(after).toMatchObject({ status: "completed", file_counts: { completed: 2, total: 2 } });

    const results = [];
    for await (const result of openai.vectorStores.search(store.id, { query: "how do I descale the kettle?" }))
      results.push(result);
    expect(searchResultsPageSchema.shape.data.parse(results)).toHaveLength(2);
    expect(results[0]).toMatchObject({ file_id: file.id, filename: "kettle.md" });
    expect(results[0]!.content[0]!.text).toContain("descale the kettle");
    expect(results[0]!.score).toBeGreaterThan(results[1]!.score);

    const content = [];
    for await (const part of openai.vectorStores.files.content(file.id, { vector_store_id: store.id }))
      content.push(part);
    expect(content).toEqual([{ type: "text", text: manual }]);
    const page = fileContentPageSchema.parse(
      await readJsonAt(test, `/vector_stores/${store.id}/files/${file.id}/content`),
    );
    expect(page.data).toEqual(content);
    const rewritten = await readJsonAt(test, `/vector_stores/${store.id}/search`, {
      method: "POST",
      body: JSON.stringify({ query: "How do I descale the kettle?", rewrite_query: true, max_num_results: 1 }),
    });
    expect(searchResultsPageSchema.parse(rewritten)).toMatchObject({
      search_query: ["descale kettle"],
      data: [{ file_id: file.id }],
    });
    const listed = vectorStoreFileListSchema.parse(
      await readJsonAt(test, `/vector_stores/${store.id}/files?order=asc`),
    );
    expect(listed.data.map((each) => each.id)).toEqual([file.id, second.id]);
    const stores = vectorStoreListSchema.parse(await readJsonAt(test, "/vector_stores"));
    expect(stores.data.map((each) => each.id)).toEqual([store.id]);
    const removed = await openai.vectorStores.files.delete(second.id, { vector_store_id: store.id });
    expect(vectorStoreFileDeletedSchema.parse(removed)).toEqual({
      id: second.id,
      object: "vector_store.file.deleted",
      deleted: true,
    });
    expect(await openai.vectorStores.retrieve(store.id)).toMatchObject({ file_counts: { completed: 1, total: 1 } });

    const entries = (await test.admin.ledger({ accountId: test.accountId })).filter((entry) => entry.kind === "charge");
    // Two files indexed, two searches: each billed at the embedding model's price.
    expect(entries.length).toBe(4);
    for (const entry of entries) {
      expect(entry.model).toBe("snowflake-arctic-embed-s");
      expect(entry.amountNanoUsd).toBe(entry.promptTokens! * 1);
    }
    await checkLedgerInvariant(test.database);

    const usage = await test.admin.storageUsage(test.accountId);
    expect(usage.kinds.vector_stores.bytes).toBeGreaterThan((await openai.vectorStores.retrieve(store.id)).usage_bytes);
    expect(vectorStoreDeletedSchema.parse(await openai.vectorStores.delete(store.id))).toEqual({
      id: store.id,
      object: "vector_store.deleted",
      deleted: true,
    });
    expect((await test.admin.storageUsage(test.accountId)).kinds.vector_stores).toEqual({ bytes: 0, items: 0 });
    await expect(openai.vectorStores.retrieve(store.id)).rejects.toMatchObject({ status: 404 });
  });

  it("filters by attributes, cuts to max_num_results, and drops what scores under the threshold", async () => {
    const test = await makeApp();
    const openai = client(test);
    const store = await openai.vectorStores.create({ name: "Notes" });
    const add = async (text: string, name: string, attributes: Record<string, string | number | boolean>) => {
      const file = await openai.files.create({ file: await toFile(Buffer.from(text), name), purpose: "assistants" });
      await openai.vectorStores.files.create(store.id, { file_id: file.id, attributes });
      return indexed(openai, store.id, file.id);
    };
    const a = await add("The garden needs water every morning in summer.", "a.txt", { year: 2023, kind: "garden" });
    const b = await add("Water the garden plants at dusk in spring.", "b.txt", { year: 2025, kind: "garden" });
    const c = await add("Invoices are due at the end of the month.", "c.txt", { year: 2025, kind: "office" });
    const search = async (body: OpenAI.VectorStores.VectorStoreSearchParams) => {
      const found = [];
      for await (const result of openai.vectorStores.search(store.id, body)) found.push(result.file_id);
      return found;
    };
    // Every chunk that shares a word or a direction with the query is found, best first, among the files the filter keeps.
    expect(await search({ query: "water the garden", filters: { type: "gte", key: "year", value: 2024 } })).toEqual([
      b.id,
      c.id,
    ]);
    expect(
      await search({
        query: "water the garden",
        filters: {
          type: "or",
          filters: [
            { type: "eq", key: "year", value: 2023 },
            { type: "in", key: "kind", value: ["office"] },
          ],
        },
      }),
    ).toHaveLength(2);
    expect(await search({ query: "water the garden", max_num_results: 1 })).toHaveLength(1);
    expect(await search({ query: "water the garden", ranking_options: { score_threshold: 0.99 } })).toEqual([]);
    expect((await search({ query: "water the garden" })).slice(0, 2).sort()).toEqual([a.id, b.id].sort());
    const updated = await openai.vectorStores.files.update(a.id, {
      vector_store_id: store.id,
      attributes: { year: 2026 },
    });
    expect(updated.attributes).toEqual({ year: 2026 });
    expect(await search({ query: "garden", filters: { type: "eq", key: "year", value: 2026 } })).toEqual([a.id]);
  });

  it("refuses in OpenAI's words: a file not the account's, a bad chunking strategy, a store of another account", async () => {
    const test = await makeApp();
    const openai = client(test);
    const store = await openai.vectorStores.create({});
    expect(
      await readJsonAt(test, `/vector_stores/${store.id}/files`, {
        method: "POST",
        body: JSON.stringify({ file_id: "file-nope" }),
      }),
    ).toMatchObject({
      status: 404,
      param: "file_id",
    });
    expect(
      await readJsonAt(test, "/vector_stores", {
        method: "POST",
        body: JSON.stringify({
          chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 200, chunk_overlap_tokens: 150 } },
        }),
      }),
    ).toMatchObject({ status: 400 });
    expect(
      await readJsonAt(test, "/vector_stores", {
        method: "POST",
        body: JSON.stringify({
          chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 4000, chunk_overlap_tokens: 0 } },
        }),
      }),
    ).toMatchObject({ status: 400, param: "chunking_strategy.static.max_chunk_size_tokens" });
    expect(
      await readJsonAt(test, "/vector_stores", {
        method: "POST",
        body: JSON.stringify({ embedding_model: "alpha-3-70b-instruct" }),
      }),
    ).toMatchObject({ status: 400, code: "model_not_supported" });

    const other = await test.admin.createAccount({ name: "other", creditUsd: 1 });
    const otherKey = (await test.admin.createKey({ accountId: other.id })).key;
    const intruder = client(test, otherKey);
    const file = await openai.files.create({
      file: await toFile(Buffer.from(manual), "kettle.md"),
      purpose: "assistants",
    });
    await openai.vectorStores.files.create(store.id, { file_id: file.id });
    await indexed(openai, store.id, file.id);
    await expect(intruder.vectorStores.retrieve(store.id)).rejects.toMatchObject({ status: 404 });
    await expect(intruder.vectorStores.search(store.id, { query: "kettle" })).rejects.toMatchObject({ status: 404 });
    await expect(intruder.vectorStores.files.retrieve(file.id, { vector_store_id: store.id })).rejects.toMatchObject({
      status: 404,
    });
    const own = await intruder.vectorStores.create({});
    await expect(intruder.vectorStores.files.create(own.id, { file_id: file.id })).rejects.toMatchObject({
      status: 404,
    });
    const listed = [];
    for await (const each of intruder.vectorStores.list()) listed.push(each.id);
    expect(listed).toEqual([own.id]);
  });

  it("fails a file it cannot read with the reason, and keeps the store", async () => {
    const test = await makeApp();
    const openai = client(test);
    const bad = await openai.files.create({
      file: await toFile(Buffer.from([0xff, 0xfe, 0x00]), "data.bin"),
      purpose: "assistants",
    });
    const broken = await openai.files.create({
      file: await toFile(Buffer.from([0x61, 0xc3, 0x28]), "notes.txt"),
      purpose: "assistants",
    });
    const store = await openai.vectorStores.create({ file_ids: [bad.id, broken.id] });
    expect(await indexed(openai, store.id, bad.id)).toMatchObject({
      status: "failed",
      last_error: { code: "unsupported_file" },
    });
    expect(await indexed(openai, store.id, broken.id)).toMatchObject({
      status: "failed",
      last_error: { code: "invalid_file" },
    });
    expect(await openai.vectorStores.retrieve(store.id)).toMatchObject({
      status: "completed",
      file_counts: { failed: 2 },
    });
  });

  it("a batch indexes its files, lists them, and counts them", async () => {
    const test = await makeApp();
    const openai = client(test);
    const store = await openai.vectorStores.create({});
    const ids = [];
    for (const [name, text] of [
      ["one.md", manual],
      ["two.txt", recipes],
    ] as const)
      ids.push((await openai.files.create({ file: await toFile(Buffer.from(text), name), purpose: "assistants" })).id);
    const batch = await openai.vectorStores.fileBatches.create(store.id, {
      file_ids: ids,
      attributes: { source: "upload" },
    });
    expect(fileBatchSchema.parse(batch).id).toMatch(/^vsfb_/);
    const done = await openai.vectorStores.fileBatches.poll(store.id, batch.id, { pollIntervalMs: 5 });
    expect(done).toMatchObject({ status: "completed", file_counts: { completed: 2, total: 2 } });
    const files = [];
    for await (const file of openai.vectorStores.fileBatches.listFiles(batch.id, { vector_store_id: store.id }))
      files.push(file);
    expect(files.map((file) => file.id).sort()).toEqual([...ids].sort());
    expect(files.every((file) => file.attributes?.source === "upload")).toBe(true);
  });

  it("a worker that restarts mid-indexing resumes at the first chunk not embedded", async () => {
    const deterministic = new DeterministicEngine({ tokenizers, tokenDelayMs: 0 });
    let steps = 0;
    let stall: Promise<never> | undefined;
    const engine: Engine = Object.assign(Object.create(deterministic) as Engine, {
      embed: async (...args: Parameters<NonNullable<Engine["embed"]>>) => {
        if (++steps === 2) return (stall = new Promise<never>(() => {}));
        return deterministic.embed!(...args);
      },
    });
    const first = await makeApp({ engine });
    const openai = client(first);
    const long = Array.from({ length: 400 }, (_, index) => `Sentence ${index} about item ${index * 7}.`).join(" ");
    const file = await openai.files.create({
      file: await toFile(Buffer.from(long), "long.txt"),
      purpose: "assistants",
    });
    const store = await openai.vectorStores.create({
      file_ids: [file.id],
      chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 } },
    });
    await expect.poll(() => stall !== undefined).toBe(true);
    const stuck = await openai.vectorStores.files.retrieve(file.id, { vector_store_id: store.id });
    expect(stuck.status).toBe("in_progress");
    const restarted = await makeApp({
      policy: { clock: first.clock, database: first.database, accounts: first.accounts, admin: first.admin },
    });
    await restarted.app.background();
    const resumed = await client(restarted, first.key).vectorStores.files.retrieve(file.id, {
      vector_store_id: store.id,
    });
    expect(resumed.status).toBe("completed");
    const chunks = [];
    for await (const part of client(restarted, first.key).vectorStores.files.content(file.id, {
      vector_store_id: store.id,
    }))
      chunks.push(part.text);
    expect(chunks.length).toBeGreaterThan(20);
  });
});
