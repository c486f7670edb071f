/**
 * The test server's generated mount: files made in memory on the first request, sent as the
 * concatenation of their byte runs, never written to disk (the Memory64 spec's 4.5 GB GGUF).
 */
import { afterEach, expect, it } from "vitest";
// @ts-expect-error: a plain JavaScript script
import { startStaticServer } from "../../../scripts/static-server.mjs";

let server: { origin: string; close(): Promise<void> } | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

it("serves a generated file as its parts in order, makes it once and only when asked, and 404s other names", async () => {
  let made = 0;
  const parts = [new Uint8Array([1, 2, 3]), new Uint8Array(0), new Uint8Array([4, 5])];
  const started: { origin: string; close(): Promise<void> } = await startStaticServer([
    {
      prefix: "/made/",
      generate: () => {
        made += 1;
        return [{ name: "model-00001-of-00002.gguf", parts }];
      },
    },
  ]);
  server = started;
  expect(made).toBe(0);
  const url = `${started.origin}/made/model-00001-of-00002.gguf`;
  for (let round = 0; round < 2; round++) {
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-length")).toBe("5");
    expect(response.headers.get("content-type")).toBe("application/octet-stream");
    expect([...new Uint8Array(await response.arrayBuffer())]).toEqual([1, 2, 3, 4, 5]);
  }
  expect(made).toBe(1);
  const head = await fetch(url, { method: "HEAD" });
  expect(head.headers.get("content-length")).toBe("5");
  expect((await fetch(`${started.origin}/made/../made/other.gguf`)).status).toBe(404);
  expect((await fetch(`${started.origin}/made/`)).status).toBe(404);
});

it("cuts a generated file named by `interrupt` after its first half while faults are on", async () => {
  const parts = [new Uint8Array(64).fill(1), new Uint8Array(64).fill(2)];
  const started: { origin: string; close(): Promise<void> } = await startStaticServer([
    { prefix: "/cut/", generate: () => [{ name: "model.gguf", parts }], interrupt: /model\.gguf$/ },
  ]);
  server = started;
  const response = await fetch(`${started.origin}/cut/model.gguf`);
  expect(response.headers.get("content-length")).toBe("128");
  await expect(response.arrayBuffer()).rejects.toThrow();
});
