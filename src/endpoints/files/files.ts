/**
 * OpenAI's Files API: a file is uploaded (`POST /v1/files`, a `multipart/form-data` form with
 * `file`, `purpose` and `expires_after`), listed (`GET /v1/files`), read (`GET /v1/files/{id}`),
 * its bytes read back (`GET …/{id}/content`) and deleted (`DELETE …/{id}`). Each file is the key's
 * account's own, and counts against its storage quota.
 */
import { BadRequestError, NotFoundError, quoted } from "../../core/errors/api.js";
import type { FileRecord } from "../../accounts/database.js";
import {
  fileListQuerySchema,
  fileUploadSchema,
  filePurposes,
  maxFilenameLength,
  openAiFilePurposes,
  type FileObject,
  type FilePurpose,
} from "../../core/wire/files.js";
import type { InferenceRoute, RequestContext } from "../../http/context.js";
import { jsonResponse } from "../../http/json-response.js";
import { listQueryOf, pageOf } from "../../http/list-query.js";
import { isUpload, parseWith } from "../../http/validate.js";
import type { EndpointDependencies } from "../dependencies.js";

export const filePaths = {
  files: /^\/files\/?$/,
  one: /^\/files\/(?<id>[^/]+)\/?$/,
  content: /^\/files\/(?<id>[^/]+)\/content\/?$/,
};

const answer = (body: unknown) => ({ response: jsonResponse(body) });

function fileNotFound(id: string): NotFoundError {
  return new NotFoundError(`No such File object: ${quoted(id)}`, { param: "id" });
}

function fileObjectOf(record: FileRecord): FileObject {
  return {
    id: record.id,
    object: "file",
    bytes: record.size,
    created_at: Math.floor(record.createdAt / 1000),
    expires_at: record.expiresAt === null ? null : Math.floor(record.expiresAt / 1000),
    filename: record.filename,
    purpose: record.purpose as FilePurpose,
    status: "processed",
    status_details: null,
  };
}

/**
 * The form's fields as `fileUploadSchema` reads them: `expires_after[…]` gathered, a number
 * written as one. Each name is an own key, whatever it is (`__proto__` included), so a name the
 * schema does not know is refused by name.
 */
function fieldsOf(form: FormData): Record<string, unknown> {
  const fields = new Map<string, unknown>();
  const expiry = new Map<string, unknown>();
  for (const [name, value] of form) {
    const part = /^expires_after\[(anchor|seconds)\]$/.exec(name)?.[1];
    const target = part ? expiry : fields;
    const field = part ?? name;
    if (target.has(field))
      throw new BadRequestError(`The form gives '${quoted(name)}' more than once; give it once.`, {
        param: name,
        code: "invalid_value",
      });
    target.set(
      field,
      part === "seconds" && typeof value === "string" && /^\d{1,10}$/.test(value) ? Number(value) : value,
    );
  }
  if (expiry.size) fields.set("expires_after", Object.fromEntries(expiry));
  return Object.fromEntries(fields) as Record<string, unknown>;
}

/** A purpose OpenAI knows that is not served here, or one it does not know, each refused as its words go. */
function checkPurpose(purpose: unknown): void {
  if (typeof purpose !== "string" || (filePurposes as readonly string[]).includes(purpose)) return;
  if (!(openAiFilePurposes as readonly string[]).includes(purpose))
    throw new BadRequestError(
      `'${quoted(purpose)}' is not one of [${openAiFilePurposes.map((each) => `'${each}'`).join(", ")}] - 'purpose'`,
      { param: "purpose", code: "invalid_value" },
    );
  throw new BadRequestError(
    `Files with purpose '${purpose}' are not served here: this API keeps files for retrieval and the Responses API. ` +
      "Upload it with purpose 'assistants' or 'user_data'.",
    { param: "purpose", code: "unsupported_value" },
  );
}

async function formOf(context: RequestContext): Promise<FormData> {
  const type = context.request.headers.get("content-type") ?? "";
  if (!isUpload(context.request))
    throw new BadRequestError(
      "Uploading a file needs a multipart/form-data body with the fields 'file' and 'purpose'; " +
        `this request's Content-Type is ${type ? `'${quoted(type)}'` : "not given"}.`,
      { code: "invalid_request" },
    );
  // A request's bytes are never shared memory.
  const body = (await context.body) as Uint8Array<ArrayBuffer>;
  try {
    return await new Response(body, { headers: { "content-type": type } }).formData();
  } catch {
    throw new BadRequestError(
      "We could not parse the multipart/form-data body of your request: check its boundary and its parts.",
      { code: "invalid_request" },
    );
  }
}

async function uploaded(dependencies: EndpointDependencies, context: RequestContext) {
  const fields = fieldsOf(await formOf(context));
  checkPurpose(fields.purpose);
  const upload = parseWith(fileUploadSchema, fields);
  const filename = upload.file instanceof File && upload.file.name ? upload.file.name : "upload";
  if (filename.length > maxFilenameLength)
    throw new BadRequestError(
      `The file's name is ${filename.length} characters long; at most ${maxFilenameLength} are kept. Rename the file.`,
      { param: "file", code: "invalid_value" },
    );
  const createdAt = dependencies.clock();
  const expiresAt = upload.expires_after ? createdAt + upload.expires_after.seconds * 1000 : null;
  const record = await dependencies.files.save(
    { id: dependencies.newId("file-"), accountId: context.key.accountId, expiresAt, filename, purpose: upload.purpose },
    new Uint8Array(await upload.file.arrayBuffer()),
  );
  return answer(fileObjectOf(record));
}

async function listed(dependencies: EndpointDependencies, accountId: string, url: URL) {
  const query = parseWith(fileListQuerySchema, listQueryOf(url));
  const page = await dependencies.files.page(accountId, query);
  if (!page)
    throw new BadRequestError(`Invalid 'after': no file with id '${quoted(query.after ?? "")}'.`, {
      param: "after",
      code: "invalid_value",
    });
  return answer(pageOf(page.files.map(fileObjectOf), page.hasMore));
}

/** `filename*` of a Content-Disposition header, which carries any name (RFC 6266, RFC 8187). */
const attachment = (filename: string) =>
  `attachment; filename*=UTF-8''${encodeURIComponent(filename).replace(/['()*]/g, (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`)}`;

/** The file endpoints, each over the key's account's files only. */
export function fileRoutes(dependencies: EndpointDependencies): InferenceRoute[] {
  const files = dependencies.files;
  const found = async (accountId: string, id: string) => {
    const record = await files.file(accountId, id);
    if (!record) throw fileNotFound(id);
    return record;
  };
  return [
    { method: "POST", path: filePaths.files, handler: async (context) => uploaded(dependencies, context) },
    { method: "GET", path: filePaths.files, handler: async ({ key, url }) => listed(dependencies, key.accountId, url) },
    {
      method: "GET",
      path: filePaths.one,
      handler: async ({ key }, { id }) => answer(fileObjectOf(await found(key.accountId, id!))),
    },
    {
      method: "GET",
      path: filePaths.content,
      handler: async ({ key }, { id }) => {
        const stored = await files.content(key.accountId, id!);
        if (!stored) throw fileNotFound(id!);
        const { file: record, content } = stored;
        // Bytes a caller uploaded are never a page of this origin: nothing sniffs them into one.
        const headers = {
          "content-type": "application/octet-stream",
          "content-disposition": attachment(record.filename),
          "x-content-type-options": "nosniff",
        };
        return { response: new Response(content as Uint8Array<ArrayBuffer>, { headers }) };
      },
    },
    {
      method: "DELETE",
      path: filePaths.one,
      handler: async ({ key }, { id }) => {
        if (!(await files.remove(key.accountId, id!))) throw fileNotFound(id!);
        return answer({ id, object: "file", deleted: true });
      },
    },
  ];
}
