/**
 * What the JSON Schema modules share: the schema type, the error that names a keyword and its
 * place, reading a schema's own keywords, `$ref` resolution, and the one reading of a schema the
 * others act on (`effective`): `allOf` wrappers and `$ref` with annotations beside it unwrapped,
 * `oneOf` with disjoint branches read as `anyOf`.
 */
export type JsonSchema = { [keyword: string]: unknown } | boolean;
export type SchemaObject = { [keyword: string]: unknown };

export class UnsupportedSchemaError extends Error {
  /** Where in the schema, as a JSON pointer. */
  readonly pointer: string;
  /**
   * `pattern`: a regular expression feature no grammar can express. Such a branch of an `anyOf`
   * is left unwritten when another branch can be (pydantic's `Decimal` is a number or a string
   * matched with lookahead): every value written still holds.
   */
  readonly kind: "keyword" | "pattern";
  constructor(message: string, pointer: string, kind: "keyword" | "pattern" = "keyword") {
    super(message);
    this.name = "UnsupportedSchemaError";
    this.pointer = pointer;
    this.kind = kind;
  }
}

/** Strings, lists and objects longer than this are not written, though the bound allows them. */
export const longestWritten = { characters: 1000, items: 256 };

/** Keywords that describe and never constrain: accepted and ignored. */
const annotations = new Set([
  "title",
  "description",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "strict",
  // OpenAPI's hint for a tagged union (pydantic writes it beside `oneOf`): the branches say it all.
  "discriminator",
  "contentEncoding",
  "contentMediaType",
  "contentSchema",
  // OpenAPI's annotations, which pydantic's `json_schema_extra` and zod's `.meta()` pass through.
  "example",
  "externalDocs",
  "xml",
]);

/** An annotation: a listed keyword, or a vendor extension (`x-…`), which by its name constrains nothing. */
export function isAnnotation(keyword: string): boolean {
  return annotations.has(keyword) || keyword.startsWith("x-");
}

export function isObject(value: unknown): value is SchemaObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Only the schema's own names: `constructor` or `__proto__` are ordinary names, never inherited. */
function own(object: SchemaObject, name: string): unknown {
  return Object.hasOwn(object, name) ? object[name] : undefined;
}

/** A JSON Pointer token (`~1` is `/`, `~0` is `~`), percent-decoded as in a URI fragment; undefined when malformed. */
function pointerToken(token: string): string | undefined {
  try {
    return decodeURIComponent(token).replaceAll("~1", "/").replaceAll("~0", "~");
  } catch {
    return undefined;
  }
}

export function resolveReference(root: unknown, reference: string, pointer: string): JsonSchema {
  const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(reference);
  const definitions = match && isObject(root) ? own(root, match[1] as string) : undefined;
  const name = match ? pointerToken(match[2] as string) : undefined;
  const target = name !== undefined && isObject(definitions) ? own(definitions, name) : undefined;
  if (target === undefined || reference === "#")
    throw new UnsupportedSchemaError(
      `'$ref' ${JSON.stringify(reference)} does not point into this schema's '$defs'`,
      pointer,
    );
  return target as JsonSchema;
}

/** Whether a schema constrains nothing beyond its annotations (definitions hold no constraint of their own). */
export function onlyAnnotations(schema: SchemaObject): boolean {
  return Object.keys(schema).every(
    (keyword) => isAnnotation(keyword) || keyword === "$defs" || keyword === "definitions",
  );
}

/**
 * The schema to act on. `allOf` (pydantic wraps a `$ref` in one to put a description beside it)
 * and `$ref` beside other keywords are one constraining schema plus annotations; more than one
 * constraining part is refused, since intersecting them is more than a grammar can do cheaply.
 * `oneOf` is `anyOf` here: `check` admits it only when no value can match two branches.
 */
export function effective(schema: SchemaObject, pointer: string): SchemaObject {
  let parts: { schema: SchemaObject; pointer: string }[];
  if (Array.isArray(schema.allOf)) {
    const { allOf, ...rest } = schema;
    parts = (allOf as unknown[]).map((part, index) => {
      if (!isObject(part))
        throw new UnsupportedSchemaError("each 'allOf' entry must be a schema object", `${pointer}/allOf/${index}`);
      return { schema: part, pointer: `${pointer}/allOf/${index}` };
    });
    parts.push({ schema: rest, pointer });
  } else if (typeof schema.$ref === "string" && !onlyAnnotations(withoutKey(schema, "$ref"))) {
    const { $ref, ...rest } = schema;
    parts = [
      { schema: { $ref }, pointer },
      { schema: rest, pointer },
    ];
  } else if (schema.nullable === true) {
    // OpenAPI 3.0's way of saying "or null".
    const { nullable: _, ...rest } = schema;
    return { anyOf: [rest, { type: "null" }] };
  } else {
    return "oneOf" in schema && !("anyOf" in schema) ? renameOneOf(schema) : schema;
  }
  const constraining = parts.filter((part) => !onlyAnnotations(part.schema));
  if (constraining.length > 1)
    throw new UnsupportedSchemaError(
      "'allOf' (or '$ref' beside other constraints) with more than one constraining schema is not supported; merge them into one schema",
      constraining[1]!.pointer,
    );
  const chosen = constraining[0]?.schema ?? {};
  return effective(chosen, constraining[0]?.pointer ?? pointer);
}

function withoutKey(schema: SchemaObject, key: string): SchemaObject {
  const copy = { ...schema };
  delete copy[key];
  return copy;
}

function renameOneOf(schema: SchemaObject): SchemaObject {
  const { oneOf, ...rest } = schema;
  return { ...rest, anyOf: oneOf };
}

/** The types a schema allows, as listed or implied by its keywords; empty when any type goes. */
export function typesOf(schema: SchemaObject): string[] {
  if (schema.type !== undefined) return (Array.isArray(schema.type) ? schema.type : [schema.type]) as string[];
  if (schema.properties !== undefined || schema.additionalProperties !== undefined) return ["object"];
  if (schema.items !== undefined || schema.prefixItems !== undefined) return ["array"];
  if (["pattern", "format", "minLength", "maxLength"].some((keyword) => schema[keyword] !== undefined))
    return ["string"];
  if (schema.minimum !== undefined || schema.maximum !== undefined) return ["number"];
  return [];
}

/** An array's parts: the schemas of its first items (`prefixItems`, or draft 7's list `items`) and of the rest (false: none). */
export function arrayParts(schema: SchemaObject): { prefix: unknown[]; rest: unknown } {
  if (Array.isArray(schema.items)) return { prefix: schema.items, rest: schema.additionalItems ?? true };
  return {
    prefix: Array.isArray(schema.prefixItems) ? schema.prefixItems : [],
    rest: schema.items ?? true,
  };
}

/** A finite number keyword, or undefined when absent. */
export function numberKeyword(schema: SchemaObject, keyword: string): number | undefined {
  const value = own(schema, keyword);
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
