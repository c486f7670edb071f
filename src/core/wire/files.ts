/**
 * The Files API (`/v1/files`): the upload's fields, the list query, and what it answers: a file
 * object, a cursor page of them, and the deletion.
 */
import { z } from "zod";
import { cursorPageOf } from "./shared.js";

/** The purposes a file may be uploaded for here: what retrieval and the Responses API read. */
export const filePurposes = ["assistants", "user_data"] as const;

/** The purposes OpenAI's API knows, which it names when one is not among them. */
export const openAiFilePurposes = ["assistants", "batch", "fine-tune", "vision", "user_data", "evals"] as const;

/** How long a file may be kept before it expires (`expires_after.seconds`): an hour to 30 days, as OpenAI bounds it. */
const fileExpiry = { minSeconds: 3600, maxSeconds: 2_592_000 } as const;

/** The longest file name kept, in characters. */
export const maxFilenameLength = 255;

/**
 * `POST /v1/files`, a `multipart/form-data` form: its fields as the endpoint reads them (`file` a
 * Blob with its name, `expires_after[anchor]` and `expires_after[seconds]` an object).
 */
export const fileUploadSchema = z.strictObject({
  file: z.instanceof(Blob),
  purpose: z.enum(filePurposes),
  expires_after: z
    .strictObject({
      anchor: z.literal("created_at"),
      seconds: z.number().int().min(fileExpiry.minSeconds).max(fileExpiry.maxSeconds),
    })
    .optional(),
});

/** `GET /v1/files`: newest first and up to 10,000 at once unless asked otherwise, as OpenAI lists them. */
export const fileListQuerySchema = z.object({
  after: z.string().min(1).optional(),
  limit: z.number().int().min(1).max(10_000).default(10_000),
  order: z.enum(["asc", "desc"]).default("desc"),
  purpose: z.string().min(1).optional(),
});

export const fileObjectSchema = z.strictObject({
  id: z.string(),
  object: z.literal("file"),
  bytes: z.number().int(),
  created_at: z.number().int(),
  expires_at: z.number().int().nullable(),
  filename: z.string(),
  purpose: z.enum(filePurposes),
  status: z.literal("processed"),
  status_details: z.null(),
});

export const fileListSchema = cursorPageOf(fileObjectSchema);

export const fileDeletedSchema = z.strictObject({
  id: z.string(),
  object: z.literal("file"),
  deleted: z.literal(true),
});

export type FileObject = z.infer<typeof fileObjectSchema>;
export type FilePurpose = (typeof filePurposes)[number];
