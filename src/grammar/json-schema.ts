/**
 * The JSON Schema subset we enforce, in three forms: a check that refuses what we cannot honour
 * (never a silent drop), a translation to an EBNF grammar for constrained decoding (xgrammar's
 * dialect, W3C-style), and a sampler that produces a valid instance (the deterministic engine).
 *
 * Supported: `type` (one or a list), `properties`, `required`, `additionalProperties` (true or
 * false), `items` (one schema), `enum`, `const`, `anyOf`, `$ref` to `#/$defs/…` or
 * `#/definitions/…`, and annotations (`title`, `description`, `default`, `examples`, …).
 * Generated JSON is compact (no whitespace) and lists every declared property in order, which
 * any instance of the schema may do.
 */
export type JsonSchema = { [keyword: string]: unknown } | boolean;

export class UnsupportedSchemaError extends Error {
  /** Where in the schema, as a JSON pointer. */
  readonly pointer: string;
  constructor(message: string, pointer: string) {
    super(message);
    this.name = "UnsupportedSchemaError";
    this.pointer = pointer;
  }
}

const annotations = [
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
];
const structural = [
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "enum",
  "const",
  "anyOf",
  "$ref",
  "$defs",
  "definitions",
];
const known = new Set([...annotations, ...structural]);
const types = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);

type SchemaObject = { [keyword: string]: unknown };

function isObject(value: unknown): value is SchemaObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A JSON Pointer token (`~1` is `/`, `~0` is `~`), percent-decoded as in a URI fragment; undefined when malformed. */
function pointerToken(token: string): string | undefined {
  try {
    return decodeURIComponent(token).replaceAll("~1", "/").replaceAll("~0", "~");
  } catch {
    return undefined;
  }
}

/** Only the schema's own names: `constructor` or `__proto__` are ordinary names, never inherited. */
function own(object: SchemaObject, name: string): unknown {
  return Object.hasOwn(object, name) ? object[name] : undefined;
}

function resolveReference(root: SchemaObject, reference: string, pointer: string): JsonSchema {
  const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(reference);
  const definitions = match ? own(root, match[1] as string) : undefined;
  const name = match ? pointerToken(match[2] as string) : undefined;
  const target = name !== undefined && isObject(definitions) ? own(definitions, name) : undefined;
  if (target === undefined)
    throw new UnsupportedSchemaError(
      `'$ref' ${JSON.stringify(reference)} does not point into this schema's '$defs'`,
      pointer,
    );
  return target as JsonSchema;
}

/** How deep schemas may nest; deeper ones are refused before any recursion can exhaust the stack. */
const maxSchemaDepth = 32;

/** Refuses any keyword or form outside the supported subset, naming it and where it is. */
export function checkSchema(schema: unknown, root: unknown = schema, pointer = "", depth = 0): void {
  if (depth > maxSchemaDepth)
    throw new UnsupportedSchemaError(`the schema nests deeper than ${maxSchemaDepth} levels`, pointer);
  if (typeof schema === "boolean") {
    if (!schema) throw new UnsupportedSchemaError("the schema 'false' admits no value", pointer);
    return;
  }
  if (!isObject(schema)) throw new UnsupportedSchemaError("a schema must be an object", pointer);
  for (const keyword of Object.keys(schema)) {
    if (!known.has(keyword))
      throw new UnsupportedSchemaError(
        `the JSON Schema keyword '${keyword}' is not supported`,
        `${pointer}/${keyword}`,
      );
  }
  const listed = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type];
  for (const type of listed) {
    if (typeof type !== "string" || !types.has(type))
      throw new UnsupportedSchemaError(`unknown type ${JSON.stringify(type)}`, `${pointer}/type`);
  }
  if (schema.enum !== undefined && (!Array.isArray(schema.enum) || schema.enum.length === 0)) {
    throw new UnsupportedSchemaError("'enum' must be a non-empty list", `${pointer}/enum`);
  }
  checkObjectKeywords(schema, root, pointer, depth);
  checkSubschemas(schema, root, pointer, depth);
}

/** `properties` (each a schema), `required` (each declared), and `additionalProperties` (true or false only). */
function checkObjectKeywords(schema: Record<string, unknown>, root: unknown, pointer: string, depth: number): void {
  if (schema.properties !== undefined) {
    if (!isObject(schema.properties))
      throw new UnsupportedSchemaError("'properties' must be an object", `${pointer}/properties`);
    for (const [name, child] of Object.entries(schema.properties))
      checkSchema(child, root, `${pointer}/properties/${name}`, depth + 1);
  }
  if (schema.required !== undefined) {
    const properties = isObject(schema.properties) ? schema.properties : {};
    if (!Array.isArray(schema.required))
      throw new UnsupportedSchemaError("'required' must be a list of names", `${pointer}/required`);
    for (const name of schema.required) {
      if (typeof name !== "string" || !Object.hasOwn(properties, name)) {
        throw new UnsupportedSchemaError(
          `required property ${JSON.stringify(name)} is not declared in 'properties'`,
          `${pointer}/required`,
        );
      }
    }
  }
  if (schema.additionalProperties !== undefined && typeof schema.additionalProperties !== "boolean") {
    throw new UnsupportedSchemaError(
      "'additionalProperties' as a schema is not supported (use true or false)",
      `${pointer}/additionalProperties`,
    );
  }
}

/** The schemas inside a schema: `items`, `anyOf`, the definitions, and where `$ref` points. */
function checkSubschemas(schema: Record<string, unknown>, root: unknown, pointer: string, depth: number): void {
  if (schema.items !== undefined) {
    if (Array.isArray(schema.items))
      throw new UnsupportedSchemaError("tuple 'items' (a list of schemas) is not supported", `${pointer}/items`);
    checkSchema(schema.items, root, `${pointer}/items`, depth + 1);
  }
  if (schema.anyOf !== undefined) {
    if (!Array.isArray(schema.anyOf) || schema.anyOf.length === 0)
      throw new UnsupportedSchemaError("'anyOf' must be a non-empty list", `${pointer}/anyOf`);
    schema.anyOf.forEach((child, index) => checkSchema(child, root, `${pointer}/anyOf/${index}`, depth + 1));
  }
  for (const container of ["$defs", "definitions"] as const) {
    const definitions = schema[container];
    if (definitions === undefined) continue;
    if (!isObject(definitions))
      throw new UnsupportedSchemaError(`'${container}' must be an object`, `${pointer}/${container}`);
    for (const [name, child] of Object.entries(definitions))
      checkSchema(child, root, `${pointer}/${container}/${name}`, depth + 1);
  }
  if (schema.$ref !== undefined) {
    if (typeof schema.$ref !== "string" || !isObject(root))
      throw new UnsupportedSchemaError("'$ref' must be a string", `${pointer}/$ref`);
    resolveReference(root, schema.$ref, `${pointer}/$ref`);
  }
}

// ------------------------------------------------------------------ grammar

/** An EBNF string literal matching `text` exactly. */
export function literal(text: string): string {
  let escaped = "";
  for (const character of text) {
    const code = character.codePointAt(0) ?? 0;
    if (character === '"' || character === "\\") escaped += `\\${character}`;
    else if (code < 0x20) escaped += `\\x${code.toString(16).padStart(2, "0")}`;
    else escaped += character;
  }
  return `"${escaped}"`;
}

/** Rules for any JSON value, compact. */
const jsonRules = [
  'json_value ::= json_object | json_array | json_string | json_number | "true" | "false" | "null"',
  'json_object ::= "{" (json_string ":" json_value ("," json_string ":" json_value)*)? "}"',
  'json_array ::= "[" (json_value ("," json_value)*)? "]"',
  'json_string ::= "\\"" json_character* "\\""',
  'json_character ::= [^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bfnrt] | "u" json_hex json_hex json_hex json_hex)',
  "json_hex ::= [0-9a-fA-F]",
  'json_number ::= json_integer ("." [0-9]+)? ([eE] [+-]? [0-9]+)?',
  'json_integer ::= "-"? ("0" | [1-9] [0-9]*)',
];

export interface GrammarOptions {
  /**
   * Allow one space after each `,` and `:`, as Python's `json.dumps` writes JSON: the official
   * chat templates show models their tool calls that way. Compact JSON is allowed too.
   */
  pythonSpacing?: boolean;
}

export class GrammarBuilder {
  readonly #rules = new Map<string, string>();
  readonly #references = new Map<string, string>();
  #counter = 0;
  /** The grammar expressions of the separators. */
  readonly comma: string;
  readonly colon: string;

  constructor(options: GrammarOptions = {}) {
    this.comma = options.pythonSpacing ? '"," " "?' : '","';
    this.colon = options.pythonSpacing ? '":" " "?' : '":"';
    for (const rule of jsonRules) {
      const [name, body] = rule.split(" ::= ") as [string, string];
      this.#rules.set(name, body.replaceAll('","', this.comma).replaceAll('":"', this.colon));
    }
  }

  /** Adds `name ::= body` and returns the name; a taken name gets a numeric suffix. */
  rule(name: string, body: string): string {
    let unique = name.replace(/[^A-Za-z0-9_]/g, "_");
    while (this.#rules.has(unique)) unique = `${name.replace(/[^A-Za-z0-9_]/g, "_")}_${++this.#counter}`;
    this.#rules.set(unique, body);
    return unique;
  }

  /** An expression matching exactly the compact JSON of the instances we generate for `schema`. */
  schema(schema: JsonSchema, root: JsonSchema, name: string): string {
    if (
      schema === true ||
      (isObject(schema) &&
        Object.keys(schema).every(
          (keyword) => annotations.includes(keyword) || keyword === "$defs" || keyword === "definitions",
        ))
    ) {
      return "json_value";
    }
    if (!isObject(schema) || !isObject(root)) throw new UnsupportedSchemaError("a schema must be an object", "");
    if (typeof schema.$ref === "string") {
      const known = this.#references.get(schema.$ref);
      if (known) return known;
      const ruleName = this.rule(`ref_${schema.$ref.split("/").pop() ?? "definition"}`, "json_value");
      this.#references.set(schema.$ref, ruleName);
      this.#rules.set(ruleName, this.schema(resolveReference(root, schema.$ref, ""), root, ruleName));
      return ruleName;
    }
    if (schema.const !== undefined) return literal(JSON.stringify(schema.const));
    if (Array.isArray(schema.enum))
      return `(${schema.enum.map((value) => literal(JSON.stringify(value))).join(" | ")})`;
    if (Array.isArray(schema.anyOf)) {
      return `(${schema.anyOf.map((child, index) => this.#named(child as JsonSchema, root, `${name}_any${index}`)).join(" | ")})`;
    }
    const listed = (
      schema.type === undefined
        ? schema.properties
          ? ["object"]
          : schema.items
            ? ["array"]
            : []
        : Array.isArray(schema.type)
          ? schema.type
          : [schema.type]
    ) as string[];
    if (listed.length === 0) return "json_value";
    return `(${listed.map((type) => this.#typed(type, schema, root, name)).join(" | ")})`;
  }

  #named(schema: JsonSchema, root: JsonSchema, name: string): string {
    const expression = this.schema(schema, root, name);
    return /^[A-Za-z_][A-Za-z0-9_]*$/.test(expression) ? expression : this.rule(name, expression);
  }

  #typed(type: string, schema: SchemaObject, root: JsonSchema, name: string): string {
    switch (type) {
      case "string":
        return "json_string";
      case "number":
        return "json_number";
      case "integer":
        return "json_integer";
      case "boolean":
        return '("true" | "false")';
      case "null":
        return '"null"';
      case "array": {
        if (schema.items === undefined) return "json_array";
        const item = this.#named(schema.items as JsonSchema, root, `${name}_item`);
        return `("[" (${item} (${this.comma} ${item})*)? "]")`;
      }
      default: {
        const properties = isObject(schema.properties) ? Object.entries(schema.properties) : [];
        if (properties.length === 0) return schema.additionalProperties === false ? '"{}"' : "json_object";
        const members = properties.map(
          ([property, child], index) =>
            `${index === 0 ? "" : `${this.comma} `}${literal(JSON.stringify(property))} ${this.colon} ${this.#named(child as JsonSchema, root, `${name}_${property}`)}`,
        );
        return `("{" ${members.join(" ")} "}")`;
      }
    }
  }

  /** The whole grammar, with `root ::= rootExpression` first. */
  build(rootExpression: string): string {
    return [`root ::= ${rootExpression}`, ...[...this.#rules].map(([name, body]) => `${name} ::= ${body}`)].join("\n");
  }
}

/** A grammar whose language is the compact JSON instances of `schema`. */
export function schemaToGrammar(schema: JsonSchema): string {
  checkSchema(schema);
  const builder = new GrammarBuilder();
  return builder.build(builder.schema(schema, schema, "value"));
}

// ------------------------------------------------------------------ sampling

/** A valid instance of `schema`, chosen by `random` (in [0, 1)). */
export function sampleSchema(schema: JsonSchema, random: () => number, root: JsonSchema = schema, depth = 0): unknown {
  if (schema === true || !isObject(schema)) return depth > 3 ? null : { note: "any" };
  if (typeof schema.$ref === "string" && isObject(root))
    return depth > 6 ? null : sampleSchema(resolveReference(root, schema.$ref, ""), random, root, depth + 1);
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[Math.floor(random() * schema.enum.length)];
  if (Array.isArray(schema.anyOf))
    return sampleSchema(
      schema.anyOf[Math.floor(random() * schema.anyOf.length)] as JsonSchema,
      random,
      root,
      depth + 1,
    );
  const listed = (
    schema.type === undefined
      ? schema.properties
        ? ["object"]
        : schema.items
          ? ["array"]
          : ["string"]
      : Array.isArray(schema.type)
        ? schema.type
        : [schema.type]
  ) as string[];
  // Prefer a non-null type, so optional-looking values still say something.
  const type = listed.find((candidate) => candidate !== "null") ?? "null";
  const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
  switch (type) {
    case "string":
      return `${words[Math.floor(random() * words.length)]}`;
    case "number":
      return Math.round(random() * 10_000) / 100;
    case "integer":
      return Math.floor(random() * 100);
    case "boolean":
      return random() < 0.5;
    case "null":
      return null;
    case "array": {
      const count = depth > 4 ? 0 : 1 + Math.floor(random() * 3);
      return Array.from({ length: count }, () =>
        sampleSchema((schema.items as JsonSchema | undefined) ?? true, random, root, depth + 1),
      );
    }
    default: {
      const result: Record<string, unknown> = {};
      for (const [property, child] of Object.entries(isObject(schema.properties) ? schema.properties : {})) {
        result[property] = sampleSchema(child as JsonSchema, random, root, depth + 1);
      }
      return result;
    }
  }
}
