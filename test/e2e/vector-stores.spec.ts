/**
 * Vector stores through the ready-made service worker: the openai SDK in a page uploads Markdown
 * and HTML, waits for indexing, searches and reads the chunks back, every step billed; the
 * Responses API answers from them with `file_search`, whole and streamed; and a worker the browser
 * stops in the middle of indexing finishes the job once it runs again.
 */
import { readFileSync } from "node:fs";
import { expect, openHarness, test } from "../support/browser.js";

test("openai-node indexes Markdown and HTML in the worker, then searches them", async ({ page }) => {
  const { accountId } = await openHarness(page);
  const result = await page.evaluate(async (accountId) => {
    const client = window.harness.client();
    const markdown = "# Kettle\n\nTo descale the kettle, boil water with white vinegar, then rinse twice.";
    const html =
      "<html><head><style>body{}</style><script>steal()</script></head><body><h1>Bread</h1><p>Knead the dough &amp; let it rise.</p></body></html>";
    const store = await client.vectorStores.create({ name: "Home" });
    const kettle = await client.vectorStores.files.uploadAndPoll(store.id, new File([markdown], "kettle.md"), {
      pollIntervalMs: 20,
    });
    const bread = await client.vectorStores.files.uploadAndPoll(store.id, new File([html], "bread.html"), {
      pollIntervalMs: 20,
    });
    const found = [];
    for await (const hit of client.vectorStores.search(store.id, { query: "descale the kettle" })) found.push(hit);
    const chunks = [];
    for await (const part of client.vectorStores.files.content(bread.id, { vector_store_id: store.id }))
      chunks.push(part.text);
    const ledger = await window.harness.handle!.admin.ledger({ accountId });
    return {
      statuses: [kettle.status, bread.status],
      first: found[0]?.filename,
      chunks,
      charges: ledger.filter((entry) => entry.kind === "charge").length,
    };
  }, accountId);
  expect(result).toEqual({
    statuses: ["completed", "completed"],
    first: "kettle.md",
    chunks: ["Bread\nKnead the dough & let it rise."],
    charges: 3,
  });
});

test("a PDF and a DOCX are read in the worker: their text, chunked", async ({ page }) => {
  await openHarness(page);
  const read = (name: string) =>
    [...readFileSync(new URL(`../fixtures/documents/${name}`, import.meta.url))] as number[];
  const chunks = await page.evaluate(
    async (documents) => {
      const client = window.harness.client();
      const store = await client.vectorStores.create({ name: "Documents" });
      const texts: Record<string, string[]> = {};
      for (const [name, bytes] of Object.entries(documents)) {
        const file = await client.vectorStores.files.uploadAndPoll(store.id, new File([new Uint8Array(bytes)], name), {
          pollIntervalMs: 20,
        });
        const read: string[] = [file.status];
        for await (const part of client.vectorStores.files.content(file.id, { vector_store_id: store.id }))
          read.push(part.text ?? "");
        texts[name] = read;
      }
      return texts;
    },
    { "kettle.pdf": read("kettle.pdf"), "bread.docx": read("bread.docx") },
  );
  expect(chunks).toEqual({
    "kettle.pdf": [
      "completed",
      "Kettle manual\nTo descale the kettle, boil water with white vinegar.\nRinse it twice before use.\n\nThe warranty covers the heating element for two years.",
    ],
    "bread.docx": [
      "completed",
      "Bread recipe\n\nKnead the dough for ten minutes, then let it rise.\n\nBake at 220 degrees for half an hour.\n\nFlour\n\n500 g\n\nWater\n\n350 ml",
    ],
  });
});

test("responses.create with file_search answers from the store and cites it, whole and streamed", async ({ page }) => {
  await openHarness(page);
  const result = await page.evaluate(async () => {
    const client = window.harness.client();
    const store = await client.vectorStores.create({ name: "Home" });
    const kettle = "To descale the kettle, boil water with white vinegar, then rinse twice.";
    const file = await client.vectorStores.files.uploadAndPoll(store.id, new File([kettle], "kettle.md"), {
      pollIntervalMs: 20,
    });
    const request = {
      model: "alpha3:8b-instruct-q8_0",
      input: "How do I descale the kettle?",
      tools: [{ type: "file_search" as const, vector_store_ids: [store.id] }],
      tool_choice: { type: "file_search" as const },
      include: ["file_search_call.results" as const],
    };
    const whole = await client.responses.create(request);
    // Streamed under `auto`: the deterministic engine decides to search, for queries it draws.
    const types = [];
    const streamed = await client.responses.create({ ...request, tool_choice: "auto", stream: true });
    for await (const event of streamed) types.push(event.type);
    const call = whole.output[0];
    const message = whole.output[1];
    return {
      fileId: file.id,
      call:
        call?.type === "file_search_call"
          ? { queries: call.queries, files: call.results?.map((r) => r.file_id) }
          : null,
      citations:
        message?.type === "message" && message.content[0]?.type === "output_text"
          ? message.content[0].annotations.map(
              (annotation) => annotation.type === "file_citation" && annotation.file_id,
            )
          : null,
      searchEvents: types.filter((type) => type.startsWith("response.file_search_call.")),
      annotationEvents: types.filter((type) => type === "response.output_text.annotation.added").length,
    };
  });
  expect(result).toEqual({
    fileId: result.fileId,
    call: { queries: ["How do I descale the kettle?"], files: [result.fileId] },
    citations: [result.fileId],
    searchEvents: [
      "response.file_search_call.in_progress",
      "response.file_search_call.searching",
      "response.file_search_call.completed",
    ],
    annotationEvents: 1,
  });
});

test("a worker stopped mid-indexing resumes when it runs again, and completes the file", async ({ page, context }) => {
  await openHarness(page);
  const started = await page.evaluate(async () => {
    const client = window.harness.client();
    const text = Array.from({ length: 40_000 }, (_, index) => `Line ${index} names item ${index * 3}.`).join("\n");
    const file = await client.files.create({ file: new File([text], "long.txt"), purpose: "assistants" });
    const store = await client.vectorStores.create({
      file_ids: [file.id],
      chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 } },
    });
    return { storeId: store.id, fileId: file.id };
  });
  const read = () =>
    page.evaluate(
      async ({ storeId, fileId }) =>
        (await window.harness.client().vectorStores.files.retrieve(fileId, { vector_store_id: storeId })).status,
      started,
    );
  await expect.poll(read, { timeout: 10_000 }).toBe("in_progress");
  const cdp = await context.newCDPSession(page);
  await cdp.send("ServiceWorker.enable");
  await cdp.send("ServiceWorker.stopAllWorkers");
  // The next request starts the worker again; what it left is picked up after answering it.
  await expect.poll(read, { timeout: 60_000, intervals: [500] }).toBe("completed");
  const chunks = await page.evaluate(async ({ storeId, fileId }) => {
    const parts = [];
    for await (const part of window.harness.client().vectorStores.files.content(fileId, { vector_store_id: storeId }))
      parts.push(part.text);
    return parts;
  }, started);
  expect(chunks.length).toBeGreaterThan(100);
  expect(chunks.at(-1)).toContain("Line 39999");
});
