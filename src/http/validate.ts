import type { z } from "zod";
import { ApiError, BadRequestError } from "../errors/api.js";
import { readBounded } from "../serve/read-bounded.js";

/** `messages[0].content`: the way OpenAI names a nested parameter. */
export function formatParam(path: readonly PropertyKey[]): string {
  let param = "";
  for (const segment of path) {
    if (typeof segment === "number") param += `[${segment}]`;
    else param += param ? `.${String(segment)}` : String(segment);
  }
  return param;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const segment of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[segment];
  }
  return value;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}

/** Turns the first zod issue into OpenAI's 400, with `param` naming the offending field. */
function toBadRequest(error: z.ZodError, input: unknown): BadRequestError {
  const issue = error.issues[0];
  if (!issue) return new BadRequestError("Invalid request body.");
  const at = issue.path;
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "";
    const param = formatParam([...at, key]);
    return new BadRequestError(`Unrecognized request argument supplied: ${param}`, {
      param,
      code: "unknown_parameter",
    });
  }
  const param = formatParam(at);
  const value = valueAt(input, at);
  if (value === undefined && at.length > 0 && (issue.code === "invalid_type" || issue.code === "invalid_union")) {
    return new BadRequestError(`Missing required parameter: '${param}'.`, {
      param,
      code: "missing_required_parameter",
    });
  }
  switch (issue.code) {
    case "invalid_type":
      return new BadRequestError(
        `Invalid type for '${param}': expected ${issue.expected}, but got ${describe(value)} instead.`,
        {
          param,
          code: "invalid_type",
        },
      );
    case "too_big":
      return new BadRequestError(
        `Invalid '${param}': expected a value <= ${String(issue.maximum)}, but got ${JSON.stringify(value)} instead.`,
        {
          param,
          code: "invalid_value",
        },
      );
    case "too_small":
      return new BadRequestError(
        Array.isArray(value) || typeof value === "string"
          ? `Invalid '${param}': expected at least ${String(issue.minimum)} item(s) or character(s).`
          : `Invalid '${param}': expected a value >= ${String(issue.minimum)}, but got ${JSON.stringify(value)} instead.`,
        { param, code: "invalid_value" },
      );
    case "invalid_union":
    case "invalid_value":
      return new BadRequestError(`Invalid value for '${param}': ${JSON.stringify(value)} is not supported here.`, {
        param,
        code: "invalid_value",
      });
    default:
      return new BadRequestError(`Invalid '${param}': ${issue.message}.`, { param, code: "invalid_value" });
  }
}

export function parseWith<Schema extends z.ZodType>(schema: Schema, input: unknown): z.infer<Schema> {
  const result = schema.safeParse(input);
  if (!result.success) throw toBadRequest(result.error, input);
  return result.data;
}

/**
 * The largest request body, in bytes: 8 MiB. The largest context window (16,384 tokens) is well
 * under 1 MiB of text, so a larger body cannot be a prompt that fits; it is refused (413) before
 * it is read whole.
 */
export const maxBodyBytes = 8 * 1024 * 1024;

function tooLarge(): ApiError {
  return new ApiError(
    413,
    `The request body is larger than ${maxBodyBytes} bytes, the most this API accepts (no model's context window holds that much text).`,
    {
      type: "invalid_request_error",
      code: "request_too_large",
    },
  );
}

/** The body as text, refused (413) once it passes `maxBodyBytes`, by its Content-Length or as it streams in. */
async function readBody(request: Request): Promise<string> {
  if (Number(request.headers.get("content-length") ?? 0) > maxBodyBytes) throw tooLarge();
  const { text, cut } = await readBounded(request.body, maxBodyBytes);
  if (cut) throw tooLarge();
  return text;
}

/**
 * Starts reading the body, so that it arrives while the key is checked. The promise is marked
 * handled: a request refused before its body is wanted (401, 404) does not report it.
 */
export function startReadingBody(request: Request): Promise<string> {
  const text = readBody(request);
  text.catch(() => undefined);
  return text;
}

/** Parses a JSON body read by `startReadingBody`; a malformed one is a 400, never a 500. */
export async function readJson(body: Promise<string>): Promise<unknown> {
  const text = await body;
  if (text.trim() === "")
    throw new BadRequestError("The request body is empty; expected a JSON object.", { code: "invalid_json" });
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new BadRequestError(`We could not parse the JSON body of your request: ${(error as Error).message}`, {
      code: "invalid_json",
    });
  }
}
