/**
 * OpenAI's Files API through openai-node unchanged (`files.create` with `toFile`, list, retrieve,
 * content, delete) and over plain HTTP: the objects, the refusals in OpenAI's words, the storage
 * quota, expiry, and that one account cannot see another's files.
 */
import OpenAI, { toFile } from "openai";
import { describe, expect, it } from "vitest";
import { fileDeletedSchema, fileListSchema, fileObjectSchema } from "../../../../src/core/wire/files.js";
import { errorBodySchema } from "../../../../src/core/wire/error.js";
import { maxUploadBytes } from "../../../../src/http/validate.js";
import { makeApp, readJsonAt, type TestApp } from "../../../support/unit-app.js";

const baseURL = "https://app.example/openai/v1";

function client(test: TestApp, apiKey = test.key) {
  const fetch = async (input: string | URL | Request, init?: RequestInit) => test.app.handle(new Request(input, init));
  return new OpenAI({ baseURL, apiKey, fetch: fetch as typeof globalThis.fetch, maxRetries: 0 });
}

/** A form posted to `/v1/files` as a person's own code would build it. */
async function upload(test: TestApp, form: FormData, apiKey = test.key) {
  const request = new Request(`${baseURL}/files`, {
    method: "POST",
    body: form,
    headers: { authorization: `Bearer ${apiKey}` },
  });
  const response = await test.app.handle(request);
  const body: unknown = await response.json();
  return response.ok ? fileObjectSchema.parse(body) : { status: response.status, ...errorBodySchema.parse(body).error };
}

function formOf(fields: Record<string, string | Blob>, filename = "notes.md") {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields))
    if (value instanceof Blob) form.append(name, value, filename);
    else form.append(name, value);
  return form;
}

// Bytes no UTF-8 decoder would keep: an upload must come back byte for byte.
const binary = new Uint8Array([0x25, 0x50, 0x44, 0x46, 0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a]);

describe("the Files API", () => {
  it("openai-node uploads, lists, retrieves, reads back byte for byte and deletes a file", async () => {
    const test = await makeApp();
    const openai = client(test);
    const created = await openai.files.create({ file: await toFile(binary, "report.pdf"), purpose: "assistants" });
    expect(fileObjectSchema.parse(created)).toEqual({
      id: created.id,
      object: "file",
      bytes: binary.byteLength,
      created_at: Math.floor(test.clock.now / 1000),
      expires_at: null,
      filename: "report.pdf",
      purpose: "assistants",
      status: "processed",
      status_details: null,
    });
    expect(created.id).toMatch(/^file-/);
    expect(await openai.files.retrieve(created.id)).toEqual(created);
    const content = await openai.files.content(created.id);
    expect(content.headers.get("content-type")).toBe("application/octet-stream");
    expect(content.headers.get("x-content-type-options")).toBe("nosniff");
    expect(new Uint8Array(await content.arrayBuffer())).toEqual(binary);
    test.clock.now += 1000;
    const second = await openai.files.create({
      file: await toFile(Buffer.from("# Notes"), "notes.md"),
      purpose: "user_data",
    });
    const listed = [];
    for await (const file of openai.files.list()) listed.push(file.id);
    expect(listed).toEqual([second.id, created.id]);
    expect(fileDeletedSchema.parse(await openai.files.delete(created.id))).toEqual({
      id: created.id,
      object: "file",
      deleted: true,
    });
    await expect(openai.files.retrieve(created.id)).rejects.toMatchObject({
      status: 404,
      message: `404 No such File object: ${created.id}`,
    });
  });

  it("lists by purpose, in either order, a page at a time after a cursor", async () => {
    const test = await makeApp();
    const ids: string[] = [];
    for (const purpose of ["assistants", "user_data", "assistants", "assistants"]) {
      const file = await upload(test, formOf({ purpose, file: new Blob(["text"]) }));
      ids.push((file as { id: string }).id);
      test.clock.now += 1000;
    }
    const first = fileListSchema.parse(await readJsonAt(test, "/files?purpose=assistants&order=asc&limit=2"));
    expect(first.data.map((file) => file.id)).toEqual([ids[0], ids[2]]);
    expect(first).toMatchObject({ first_id: ids[0], last_id: ids[2], has_more: true });
    const next = fileListSchema.parse(await readJsonAt(test, `/files?purpose=assistants&order=asc&after=${ids[2]}`));
    expect(next.data.map((file) => file.id)).toEqual([ids[3]]);
    expect(next.has_more).toBe(false);
    const newest = fileListSchema.parse(await readJsonAt(test, `/files?after=${ids[3]}&limit=2`));
    expect(newest.data.map((file) => file.id)).toEqual([ids[2], ids[1]]);
    expect(await readJsonAt(test, "/files?after=file-nothing")).toMatchObject({ status: 400, param: "after" });
    expect(await readJsonAt(test, "/files?limit=0")).toMatchObject({ status: 400, param: "limit" });
  });

  it("refuses a wrong form in OpenAI's words, and stores nothing for it", async () => {
    const test = await makeApp();
    const file = new Blob(["text"]);
    expect(await upload(test, formOf({ purpose: "answers", file }))).toMatchObject({
      status: 400,
      param: "purpose",
      message:
        "'answers' is not one of ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals'] - 'purpose'",
    });
    expect(await upload(test, formOf({ purpose: "batch", file }))).toMatchObject({
      status: 400,
      param: "purpose",
      message: expect.stringMatching(/^Files with purpose 'batch' are not served here.*'assistants' or 'user_data'/),
    });
    expect(await upload(test, formOf({ purpose: "assistants" }))).toMatchObject({
      status: 400,
      message: "Missing required parameter: 'file'.",
    });
    expect(await upload(test, formOf({ file }))).toMatchObject({ status: 400, param: "purpose" });
    expect(await upload(test, formOf({ purpose: "assistants", file, model: "x" }))).toMatchObject({
      status: 400,
      message: "Unrecognized request argument supplied: model",
    });
    expect(await upload(test, formOf({ purpose: "assistants", file, ["__proto__"]: "x" }))).toMatchObject({
      status: 400,
      message: "Unrecognized request argument supplied: __proto__",
    });
    const twice = formOf({ purpose: "assistants", file });
    twice.append("purpose", "user_data");
    expect(await upload(test, twice)).toMatchObject({ status: 400, param: "purpose" });
    for (const seconds of ["60", "2592001", "soon"])
      expect(
        await upload(
          test,
          formOf({
            purpose: "assistants",
            file,
            "expires_after[anchor]": "created_at",
            "expires_after[seconds]": seconds,
          }),
        ),
      ).toMatchObject({ status: 400, param: "expires_after.seconds" });
    expect(await upload(test, formOf({ purpose: "assistants", file }, "n".repeat(256)))).toMatchObject({
      status: 400,
      param: "file",
    });
    const json = await test.app.handle(test.post("/v1/files", { purpose: "assistants" }));
    expect(json.status).toBe(400);
    expect(((await json.json()) as { error: { message: string } }).error.message).toMatch(/multipart\/form-data/);
    expect(fileListSchema.parse(await readJsonAt(test, "/files")).data).toEqual([]);
  });

  it("refuses an upload over its bound with a 413 before reading it whole", async () => {
    const test = await makeApp();
    const big = await upload(test, formOf({ purpose: "assistants", file: new Blob([new Uint8Array(maxUploadBytes)]) }));
    expect(big).toMatchObject({ status: 413, code: "request_too_large" });
  });

  it("reads an upload only for a key that may make it: a wrong key's is refused unread", async () => {
    const test = await makeApp();
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>(
      { pull: (controller) => void (pulled++, controller.enqueue(new Uint8Array(1 << 20))) },
      { highWaterMark: 0 },
    );
    const request = new Request(`${baseURL}/files`, {
      method: "POST",
      body,
      duplex: "half",
      headers: { authorization: "Bearer sk-wrong", "content-type": "multipart/form-data; boundary=x" },
    } as RequestInit);
    expect((await test.app.handle(request)).status).toBe(401);
    expect(pulled).toBe(0);
  });

  it("counts each file against its account's storage quota, refuses one past it, and gives the space back on deletion", async () => {
    const test = await makeApp();
    await test.admin.setStorageQuota(test.accountId, { bytes: 3000 });
    const kept = await upload(test, formOf({ purpose: "assistants", file: new Blob([new Uint8Array(2000)]) }));
    expect(kept).toMatchObject({ bytes: 2000 });
    const usage = await test.admin.storageUsage(test.accountId);
    expect(usage.kinds.files.items).toBe(1);
    expect(usage.kinds.files.bytes).toBeGreaterThan(2000);
    const refused = await upload(test, formOf({ purpose: "assistants", file: new Blob([new Uint8Array(2000)]) }));
    expect(refused).toMatchObject({ status: 403, code: "storage_quota_exceeded" });
    expect(fileListSchema.parse(await readJsonAt(test, "/files")).data).toHaveLength(1);
    await readJsonAt(test, `/files/${(kept as { id: string }).id}`, { method: "DELETE" });
    expect((await test.admin.storageUsage(test.accountId)).kinds.files).toEqual({ bytes: 0, items: 0 });
    expect(await upload(test, formOf({ purpose: "assistants", file: new Blob([new Uint8Array(2000)]) }))).toMatchObject(
      {
        bytes: 2000,
      },
    );
  });

  it("a file that expires is gone after its time, and its space is given back by a later upload", async () => {
    const test = await makeApp();
    const form = formOf({
      purpose: "user_data",
      file: new Blob(["soon gone"]),
      "expires_after[anchor]": "created_at",
      "expires_after[seconds]": "3600",
    });
    const file = (await upload(test, form)) as { id: string; expires_at: number; created_at: number };
    expect(file.expires_at).toBe(file.created_at + 3600);
    test.clock.now += 3600_000;
    expect(await readJsonAt(test, `/files/${file.id}`)).toMatchObject({ status: 404 });
    expect(await readJsonAt(test, `/files/${file.id}/content`)).toMatchObject({ status: 404 });
    await upload(test, formOf({ purpose: "user_data", file: new Blob(["kept"]) }));
    expect((await test.admin.storageUsage(test.accountId)).kinds.files.items).toBe(1);
  });

  it("another account cannot list, read, read back or delete an account's file", async () => {
    const test = await makeApp();
    const other = await test.admin.createAccount({ name: "other", creditUsd: 1 });
    const { key } = await test.admin.createKey({ accountId: other.id });
    const file = (await upload(test, formOf({ purpose: "assistants", file: new Blob(["private"]) }))) as { id: string };
    expect(fileListSchema.parse(await readJsonAt(test, "/files", {}, key)).data).toEqual([]);
    for (const [path, method] of [
      [`/files/${file.id}`, "GET"],
      [`/files/${file.id}/content`, "GET"],
      [`/files/${file.id}`, "DELETE"],
    ])
      expect(await readJsonAt(test, path!, { method: method! }, key)).toMatchObject({ status: 404 });
    expect(await readJsonAt(test, `/files?after=${file.id}`, {}, key)).toMatchObject({ status: 400 });
    expect(await readJsonAt(test, `/files/${file.id}`)).toMatchObject({ id: file.id });
    // The admin's deletion of the account's stored data takes its files, and only its own.
    const theirs = (await upload(test, formOf({ purpose: "assistants", file: new Blob(["theirs"]) }), key)) as {
      id: string;
    };
    expect(await test.admin.deleteStoredData(test.accountId)).toMatchObject({ items: 1 });
    expect(await readJsonAt(test, `/files/${file.id}`)).toMatchObject({ status: 404 });
    expect(await readJsonAt(test, `/files/${theirs.id}`, {}, key)).toMatchObject({ id: theirs.id });
    expect((await test.admin.storageUsage(test.accountId)).kinds.files).toEqual({ bytes: 0, items: 0 });
  });
});
