import type { z } from "zod";
import { ApiError, BadRequestError } from "../core/errors/api.js";
import { readBoundedBytes } from "../pipeline/read-bounded.js";
import { characters } from "../core/wire/collections.js";
import { maxNesting, nestsTooDeep } from "../core/wire/nesting.js";

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

/** A JSON value's type as OpenAI's messages name it: "an integer", "a decimal", "a string"… */
function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  // JSON.parse reads 1e999 as Infinity.
  if (typeof value === "number")
    return Number.isFinite(value) ? (Number.isInteger(value) ? "an integer" : "a decimal") : "a number out of range";
  return `a ${typeof value}`;
}

/** What zod expected, in OpenAI's words. */
function expectedType(expected: string): string {
  const words: Record<string, string> = {
    int: "an integer",
    record: "an object",
    object: "an object",
    array: "an array",
  };
  return Object.hasOwn(words, expected) ? words[expected]! : `a ${expected}`;
}

/**
 * A value as an error message quotes it: its JSON, cut short past 100 characters. A message never
 * echoes a body, and a value nested a million deep is quoted without recursing into it.
 */
function shown(value: unknown): string {
  const json = preview(value, 4);
  return json.length > 100 ? `${json.slice(0, 100)}…` : json;
}

/** `value`'s JSON to `depth` levels and the first few items of each, with "…" for the rest. */
function preview(value: unknown, depth: number): string {
  if (typeof value === "string") return JSON.stringify(value.length > 100 ? value.slice(0, 100) : value);
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? String(value);
  if (depth <= 0) return Array.isArray(value) ? "[…]" : "{…}";
  const items = Array.isArray(value)
    ? value.slice(0, 8).map((item) => preview(item, depth - 1))
    : Object.entries(value)
        .slice(0, 8)
        .map(([key, item]) => `${JSON.stringify(key.slice(0, 100))}:${preview(item, depth - 1)}`);
  const count = Array.isArray(value) ? value.length : Object.keys(value).length;
  const inner = items.join(",") + (count > 8 ? ",…" : "");
  return Array.isArray(value) ? `[${inner}]` : `{${inner}}`;
}

/**
 * OpenAI's words for an array or a string of the wrong length: "Invalid 'stop': array too long.
 * Expected an array with maximum length 4, but got an array with length 5 instead.", and for an
 * empty one "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an
 * empty array instead." (code `empty_array`).
 */
function wrongLength(param: string, value: string | unknown[], bound: "maximum" | "minimum", limit: number) {
  const kind = Array.isArray(value) ? "array" : "string";
  const article = Array.isArray(value) ? "an array" : "a string";
  // A string's length in characters, as OpenAI counts it (an emoji is one).
  const length = typeof value === "string" ? characters(value) : value.length;
  const [problem, code] =
    bound === "maximum"
      ? [`${kind} too long`, `${kind}_above_max_length`]
      : value.length === 0
        ? [`empty ${kind}`, `empty_${kind}`]
        : [`${kind} too short`, `${kind}_below_min_length`];
  const got = length === 0 ? `an empty ${kind}` : `${article} with length ${length}`;
  return new BadRequestError(
    `Invalid '${param}': ${problem}. Expected ${article} with ${bound} length ${limit}, but got ${got} instead.`,
    { param, code },
  );
}

/** OpenAI's words for an object with too many properties (`metadata`'s 16). */
function tooManyProperties(param: string, value: object, limit: number): BadRequestError {
  const count = Object.keys(value).length;
  return new BadRequestError(
    `Invalid '${param}': too many properties. Expected an object with at most ${limit} properties, but got an object with ${count} properties instead.`,
    { param, code: "object_above_max_properties" },
  );
}

/** OpenAI's words for a property name too long (`metadata`'s keys): the param names the property. */
function longPropertyName(at: readonly PropertyKey[], params: Record<string, unknown>): BadRequestError {
  const name = String(params["propertyName"]);
  const quoted = name.length > 100 ? `${name.slice(0, 100)}…` : name;
  return new BadRequestError(
    `Invalid property name in '${formatParam(at.slice(0, -1))}': '${quoted}' is too long. ` +
      `Expected a string with maximum length ${String(params["maximum"])}, but got a string with length ${String(params["length"])} instead.`,
    { param: formatParam([...at.slice(0, -1), quoted]), code: "invalid_value" },
  );
}

/** Turns the first zod issue into OpenAI's 400, with `param` naming the offending field. */
function toBadRequest(error: z.ZodError, input: unknown): BadRequestError {
  const issue = error.issues[0];
  if (!issue) return new BadRequestError("Invalid request body.");
  const at = issue.path;
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0] ?? "";
    const param = formatParam([...at, key.length > 100 ? `${key.slice(0, 100)}…` : key]);
    return new BadRequestError(`Unrecognized request argument supplied: ${param}`, {
      param,
      code: "unknown_parameter",
    });
  }
  if (issue.code === "custom" && issue.params?.["propertyName"] !== undefined)
    return longPropertyName(at, issue.params);
  return valueIssue(issue, formatParam(at), valueAt(input, at));
}

/** The 400 for a value that is wrong, or missing where one is required. */
function valueIssue(issue: z.core.$ZodIssue, param: string, value: unknown): BadRequestError {
  if (value === undefined && param !== "" && (issue.code === "invalid_type" || issue.code === "invalid_union")) {
    return new BadRequestError(`Missing required parameter: '${param}'.`, {
      param,
      code: "missing_required_parameter",
    });
  }
  const invalid = (message: string) => new BadRequestError(message, { param, code: "invalid_value" });
  const measured = Array.isArray(value) || typeof value === "string";
  switch (issue.code) {
    case "invalid_type":
      return new BadRequestError(
        `Invalid type for '${param}': expected ${expectedType(issue.expected)}, but got ${describe(value)} instead.`,
        { param, code: "invalid_type" },
      );
    case "too_big":
      if (measured) return wrongLength(param, value, "maximum", Number(issue.maximum));
      if (issue.origin === "object" && typeof value === "object" && value !== null)
        return tooManyProperties(param, value, Number(issue.maximum));
      return invalid(
        `Invalid '${param}': expected a value <= ${String(issue.maximum)}, but got ${shown(value)} instead.`,
      );
    case "too_small":
      if (measured) return wrongLength(param, value, "minimum", Number(issue.minimum));
      return invalid(
        `Invalid '${param}': expected a value >= ${String(issue.minimum)}, but got ${shown(value)} instead.`,
      );
    case "invalid_union":
      return unionIssue(issue, param, value);
    case "invalid_value":
      return typeof value === "string" && issue.values.some((option) => typeof option === "string")
        ? notSupported(value, issue.values, param)
        : invalid(`Invalid value for '${param}': ${shown(value)} is not supported here.`);
    case "invalid_format":
      if (issue.format === "regex" && typeof value === "string")
        return invalid(
          `Invalid '${param}': string does not match pattern. Expected a string that matches the pattern '${issue.pattern?.replace(/^\/|\/$/g, "")}'.`,
        );
      return invalid(`Invalid '${param}': ${issue.message}.`);
    case "custom":
      // A check that words its own message (OpenAI's sentence) and names the parameter itself.
      if (issue.params?.["whole"] === true) return new BadRequestError(issue.message, { param, code: null });
      return invalid(`Invalid '${param}': ${issue.message}.`);
    default:
      return invalid(`Invalid '${param}': ${issue.message}.`);
  }
}

/** OpenAI's words for a value outside a list: "Invalid value: 'robot'. Supported values are: 'system', 'user', and 'tool'." */
function notSupported(value: string, options: readonly unknown[], param: string): BadRequestError {
  const quoted = options.filter((option) => typeof option === "string").map((option) => `'${option}'`);
  const list = quoted.length > 2 ? `${quoted.slice(0, -1).join(", ")}, and ${quoted.at(-1)}` : quoted.join(" and ");
  const shownValue = value.length > 100 ? `${value.slice(0, 100)}…` : value;
  return new BadRequestError(`Invalid value: '${shownValue}'. Supported values are: ${list}.`, {
    param,
    code: "invalid_value",
  });
}

/** "expected a string", or "expected one of a string or an array" where the forms differ. */
function typeRefusal(param: string, expected: readonly string[], value: unknown): BadRequestError {
  const types = [...new Set(expected.map(expectedType))];
  const wanted = types.length === 1 ? types[0]! : `one of ${types.join(" or ")}`;
  return new BadRequestError(`Invalid type for '${param}': expected ${wanted}, but got ${describe(value)} instead.`, {
    param,
    code: "invalid_type",
  });
}

/**
 * The refused item of a list that a form took for its own, if one did. That is the item a form
 * read furthest to (`["a", 3]` as a prompt is a list of strings whose second item is not one),
 * one refused for its contents (`[[]]`: a list of token lists whose first is empty), or, where
 * every form that reads lists refused the first item for its type, that item (`stop: [3]`).
 */
function itemIssue(inners: readonly z.core.$ZodIssue[], param: string, value: unknown[]): BadRequestError | undefined {
  const items = inners.filter((inner) => typeof inner.path[0] === "number");
  const byContents = items
    .filter((inner) => Number(inner.path[0]) > 0 || inner.path.length > 1 || inner.code !== "invalid_type")
    .sort((a, b) => Number(b.path[0]) - Number(a.path[0]) || b.path.length - a.path.length)[0];
  if (byContents) return valueIssue(byContents, param + formatParam(byContents.path), valueAt(value, byContents.path));
  const types = items.flatMap((inner) => (inner.code === "invalid_type" ? [inner.expected] : []));
  return types.length > 0 ? typeRefusal(`${param}[0]`, types, value[0]) : undefined;
}

/** The 400 for a value that none of a parameter's forms takes. */
function unionIssue(issue: z.core.$ZodIssueInvalidUnion, param: string, value: unknown): BadRequestError {
  // A discriminated union's tag outside its list (a message's `role`, a response format's `type`).
  const tags = (issue as { options?: unknown }).options;
  if (typeof value === "string" && Array.isArray(tags) && tags.some((tag) => typeof tag === "string"))
    return notSupported(value, tags, param);
  const inners = issue.errors.flat();
  // The branch of the value's own type, refused only for its length (a prompt array too long).
  const length = inners.find((inner) => (inner.code === "too_big" || inner.code === "too_small") && !inner.path.length);
  const measured = Array.isArray(value) || typeof value === "string";
  if (length?.code === "too_big" && measured) return wrongLength(param, value, "maximum", Number(length.maximum));
  if (length?.code === "too_small" && measured) return wrongLength(param, value, "minimum", Number(length.minimum));
  const item = Array.isArray(value) ? itemIssue(inners, param, value) : undefined;
  if (item) return item;
  // A value of none of the forms' types: "expected one of a string or an array".
  const types = issue.errors.map((branch) =>
    branch.length === 1 && branch[0]?.code === "invalid_type" && branch[0].path.length === 0
      ? branch[0].expected
      : undefined,
  );
  if (types.length > 0 && types.every((type) => type !== undefined)) return typeRefusal(param, types, value);
  return new BadRequestError(`Invalid value for '${param}': ${shown(value)} is not supported here.`, {
    param,
    code: "invalid_value",
  });
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

/** The largest upload (a `multipart/form-data` body, `POST /v1/files`): its file and its fields. */
export const maxUploadBytes = 64 * 1024 * 1024;

/** Whether the request's body is a form (`multipart/form-data`), which is read as bytes up to `maxUploadBytes`. */
export function isUpload(request: Request): boolean {
  return /^multipart\/form-data\b/i.test(request.headers.get("content-type") ?? "");
}

function tooLarge(limit: number): ApiError {
  const what =
    limit === maxBodyBytes
      ? "(no model's context window holds that much text)"
      : "for an upload: a file stored on this device is at most that size";
  return new ApiError(413, `The request body is larger than ${limit} bytes, the most this API accepts ${what}.`, {
    type: "invalid_request_error",
    code: "request_too_large",
  });
}

/** The body's bytes, refused (413) once they pass the bound of its kind, by its Content-Length or as it streams in. */
async function readBody(request: Request): Promise<Uint8Array> {
  const limit = isUpload(request) ? maxUploadBytes : maxBodyBytes;
  if (Number(request.headers.get("content-length") ?? 0) > limit) throw tooLarge(limit);
  const { bytes, cut } = await readBoundedBytes(request.body, limit);
  if (cut) throw tooLarge(limit);
  return bytes;
}

/**
 * Starts reading the body, so that it arrives while the key is checked. The promise is marked
 * handled: a request refused before its body is wanted (401, 404) does not report it.
 */
export function startReadingBody(request: Request): Promise<Uint8Array> {
  const bytes = readBody(request);
  bytes.catch(() => undefined);
  return bytes;
}

/** Parses a JSON body read by `startReadingBody`; a malformed one is a 400, never a 500. */
export async function readJson(body: Promise<Uint8Array>): Promise<unknown> {
  const text = new TextDecoder().decode(await body);
  if (text.trim() === "")
    throw new BadRequestError("The request body is empty; expected a JSON object.", { code: "invalid_json" });
  if (nestsTooDeep(text))
    throw new BadRequestError(
      `We could not parse the JSON body of your request: its arrays and objects nest deeper than ${maxNesting} levels.`,
      { code: "invalid_json" },
    );
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new BadRequestError(`We could not parse the JSON body of your request: ${(error as Error).message}`, {
      code: "invalid_json",
    });
  }
}
