/**
 * The Files API through the ready-made service worker: the openai SDK in a page uploads and reads
 * back a large file byte for byte, and a tab closed in the middle of an upload leaves either the
 * whole file or nothing, with the account's storage counting exactly what is kept.
 */
import { fileListSchema } from "../../src/core/wire/files.js";
import { expect, openHarness, test } from "../support/browser.js";

// Large enough that the upload is still going when the tab closes; under the 64 MiB bound.
const size = 48 * 2 ** 20;

test("a 48 MiB upload comes back byte for byte and is counted in the account's storage", async ({ page }) => {
  const { accountId } = await openHarness(page);
  const result = await page.evaluate(
    async ({ size, accountId }) => {
      const bytes = new Uint8Array(size);
      for (let index = 0; index < size; index += 4096) bytes[index] = (index / 4096) % 251;
      const client = window.harness.client();
      const file = await client.files.create({ file: new File([bytes], "big.bin"), purpose: "assistants" });
      const back = new Uint8Array(await (await client.files.content(file.id)).arrayBuffer());
      let same = back.length === bytes.length;
      for (let index = 0; same && index < size; index += 4096) same = back[index] === bytes[index];
      const usage = await window.harness.handle!.admin.storageUsage(accountId);
      return { bytes: file.bytes, same, stored: usage.kinds.files };
    },
    { size, accountId },
  );
  expect(result).toMatchObject({ bytes: size, same: true, stored: { items: 1 } });
  expect(result.stored.bytes).toBeGreaterThan(size);
  expect(result.stored.bytes).toBeLessThan(size + 1000);
});

test("a tab closed in the middle of an upload leaves the whole file or nothing, counted exactly", async ({
  context,
  page,
}) => {
  const { key, accountId } = await openHarness(page);
  const uploader = await context.newPage();
  await uploader.goto(page.url());
  // Started, not awaited: the tab goes while its body is still being sent and stored.
  await uploader.evaluate(
    ({ size, key, baseURL }) => {
      const form = new FormData();
      form.append("purpose", "assistants");
      form.append("file", new File([new Uint8Array(size)], "cut.bin"));
      void fetch(`${baseURL}/files`, { method: "POST", body: form, headers: { authorization: `Bearer ${key}` } });
    },
    { size, key, baseURL: await page.evaluate(() => window.harness.baseURL) },
  );
  await uploader.close();
  // Sampled while the worker may still be storing it: at every moment the file is whole or
  // absent, and the account's storage counts exactly what is there.
  for (let sample = 0; sample < 6; sample++) {
    const seen = await page.evaluate(async (accountId) => {
      const listed = await (await window.harness.fetch("/files")).json();
      const usage = await window.harness.handle!.admin.storageUsage(accountId);
      const lengths = [];
      for (const file of listed.data)
        lengths.push((await (await window.harness.fetch(`/files/${file.id}/content`)).arrayBuffer()).byteLength);
      return { listed, lengths, usage: usage.kinds.files };
    }, accountId);
    const files = fileListSchema.parse(seen.listed).data;
    expect(files.length).toBeLessThanOrEqual(1);
    expect(seen.usage.items).toBe(files.length);
    expect(files.map((file) => file.bytes)).toEqual(files.map(() => size));
    expect(seen.lengths).toEqual(files.map(() => size));
    if (files.length === 0) expect(seen.usage.bytes).toBe(0);
    await page.waitForTimeout(500);
  }
});
