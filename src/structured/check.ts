/**
 * The check every schema passes before it is used: each keyword is one we enforce (by grammar or
 * by validating the finished value) or an annotation; anything else is refused with its name and
 * its place, never silently dropped.
 */
import { formatNames, knownFormat } from "./formats.js";
import { validate } from "./validate.js";
import { parsePattern, PatternError, PatternLimitError } from "./regex.js";
import {
  isAnnotation,
  arrayParts,
  effective,
  isObject,
  longestWritten,
  numberKeyword,
  resolveReference,
  typesOf,
  UnsupportedSchemaError,
  type SchemaObject,
} from "./schema.js";

const structural = new Set([
  "type",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "allOf",
  "$ref",
  "$defs",
  "definitions",
  "nullable",
  // strings
  "pattern",
  "format",
  "minLength",
  "maxLength",
  // numbers
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  // arrays
  "items",
  "prefixItems",
  "additionalItems",
  "minItems",
  "maxItems",
  "uniqueItems",
  // objects
  "properties",
  "required",
  "additionalProperties",
  "propertyNames",
  "minProperties",
  "maxProperties",
]);
const types = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);
const counts = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"];
const bounds = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
/** How deep schemas may nest; deeper ones are refused before any recursion can exhaust the stack. */
const maxSchemaDepth = 32;

function fail(message: string, pointer: string): never {
  throw new UnsupportedSchemaError(message, pointer);
}

/** Refuses any keyword or form outside the supported subset, naming it and where it is. */
export function checkSchema(schema: unknown, root: unknown = schema, pointer = "", depth = 0): void {
  if (depth > maxSchemaDepth) fail(`the schema nests deeper than ${maxSchemaDepth} levels`, pointer);
  if (typeof schema === "boolean") {
    if (!schema) fail("the schema 'false' admits no value", pointer);
    return;
  }
  if (!isObject(schema)) fail("a schema must be an object", pointer);
  for (const keyword of Object.keys(schema)) {
    if (!structural.has(keyword) && !isAnnotation(keyword))
      fail(`the JSON Schema keyword '${keyword}' is not supported`, `${pointer}/${keyword}`);
  }
  checkValues(schema, pointer);
  checkBounds(schema, pointer);
  checkListed(schema, pointer);
  checkStringKeywords(schema, pointer);
  checkObjectKeywords(schema, root, pointer, depth);
  checkSubschemas(schema, root, pointer, depth);
  if (schema.oneOf !== undefined) checkDisjoint(schema.oneOf as unknown[], root, `${pointer}/oneOf`);
  effective(schema, pointer);
}

function checkValues(schema: SchemaObject, pointer: string): void {
  const listed = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type];
  for (const type of listed) {
    if (typeof type !== "string" || !types.has(type)) fail(`unknown type ${JSON.stringify(type)}`, `${pointer}/type`);
  }
  if (schema.enum !== undefined && (!Array.isArray(schema.enum) || schema.enum.length === 0))
    fail("'enum' must be a non-empty list", `${pointer}/enum`);
  for (const keyword of counts) {
    const value = schema[keyword];
    if (value !== undefined && !(Number.isInteger(value) && (value as number) >= 0))
      fail(`'${keyword}' must be a non-negative integer`, `${pointer}/${keyword}`);
  }
  for (const keyword of bounds) {
    const value = schema[keyword];
    if (value !== undefined && !(typeof value === "number" && Number.isFinite(value)))
      fail(`'${keyword}' must be a number`, `${pointer}/${keyword}`);
  }
  const multiple = schema.multipleOf;
  if (multiple !== undefined && !(typeof multiple === "number" && Number.isFinite(multiple) && multiple > 0))
    fail("'multipleOf' must be a number above 0", `${pointer}/multipleOf`);
  if (schema.uniqueItems !== undefined && typeof schema.uniqueItems !== "boolean")
    fail("'uniqueItems' must be true or false", `${pointer}/uniqueItems`);
  if (schema.nullable !== undefined && typeof schema.nullable !== "boolean")
    fail("'nullable' must be true or false", `${pointer}/nullable`);
}

/**
 * Bounds that no value meets, or past what a grammar writes: a 400 naming them, not a reply
 * written and then refused by the check of finished values.
 */
function checkBounds(schema: SchemaObject, pointer: string): void {
  const pairs = [
    ["minLength", "maxLength", "string"],
    ["minItems", "maxItems", "list"],
    ["minProperties", "maxProperties", "object"],
  ] as const;
  for (const [low, high, kind] of pairs) {
    const [min, max] = [numberKeyword(schema, low), numberKeyword(schema, high)];
    if (min !== undefined && max !== undefined && min > max)
      fail(`'${low}' ${min} is above '${high}' ${max}: no ${kind} satisfies both`, `${pointer}/${low}`);
  }
  const required = Array.isArray(schema.required) ? new Set(schema.required).size : 0;
  const maxProperties = numberKeyword(schema, "maxProperties");
  if (maxProperties !== undefined && required > maxProperties)
    fail(`'required' names ${required} properties, more than 'maxProperties' ${maxProperties}`, `${pointer}/required`);
  const minLength = numberKeyword(schema, "minLength") ?? 0;
  if (minLength > longestWritten.characters)
    fail(`'minLength' over ${longestWritten.characters} is not supported`, `${pointer}/minLength`);
  const minItems = numberKeyword(schema, "minItems") ?? 0;
  if (minItems > longestWritten.items)
    fail(`'minItems' over ${longestWritten.items} is not supported`, `${pointer}/minItems`);
  const { prefix, rest } = arrayParts(schema);
  if (rest === false && minItems > prefix.length)
    fail("'minItems' asks for more items than the array may hold", `${pointer}/minItems`);
  if (typesOf(schema).includes("integer")) checkIntegerBounds(schema, pointer);
}

/**
 * An integer's bounds lie within ±(2^53 − 1): past it a JSON number is not exact (1e20 + 1 reads
 * as 1e20), so neither a grammar, a sampler nor a validator could hold such a bound to the unit.
 */
function checkIntegerBounds(schema: SchemaObject, pointer: string): void {
  for (const keyword of bounds) {
    const bound = numberKeyword(schema, keyword);
    if (bound !== undefined && Math.abs(bound) > Number.MAX_SAFE_INTEGER)
      fail(
        `'${keyword}' ${bound} is past 2^53 (${Number.MAX_SAFE_INTEGER}), where JSON numbers are not exact, so no integer bound there can be held; keep an integer's bounds within ±${Number.MAX_SAFE_INTEGER}, or leave that side unbounded`,
        `${pointer}/${keyword}`,
      );
  }
}

/** The keywords a listed value (`const`, `enum`) must hold beside its list: its type and bounds. */
const listedKeywords = ["type", "nullable", ...counts, ...bounds, "multipleOf"];

/** Each listed value holds the schema's type and bounds: a grammar writes listed values as they are. */
function checkListed(schema: SchemaObject, pointer: string): void {
  const listed =
    schema.const !== undefined
      ? [{ value: schema.const, name: "'const'", at: `${pointer}/const` }]
      : Array.isArray(schema.enum)
        ? schema.enum.map((value, index) => ({ value, name: `'enum' value ${index}`, at: `${pointer}/enum/${index}` }))
        : [];
  if (listed.length === 0) return;
  const bounds = Object.fromEntries(
    listedKeywords.flatMap((keyword) => (Object.hasOwn(schema, keyword) ? [[keyword, schema[keyword]]] : [])),
  );
  for (const { value, name, at } of listed) {
    const violation = validate(bounds, value);
    if (violation) fail(`${name} breaks the schema's own keywords: it ${violation.message}`, at);
  }
}

/** `format` must be one we write; `pattern` must be a regular expression the grammar can express. */
function checkStringKeywords(schema: SchemaObject, pointer: string): void {
  const format = schema.format;
  // zod writes its own formats (cuid, ulid, nanoid…) with the pattern that defines them: the pattern holds.
  const definedByPattern = typeof format === "string" && typeof schema.pattern === "string";
  if (format !== undefined && (typeof format !== "string" || !(knownFormat(format) || definedByPattern)))
    fail(
      `the string format ${JSON.stringify(format)} is not supported (supported: ${formatNames().join(", ")})`,
      `${pointer}/format`,
    );
  if (schema.pattern === undefined) return;
  if (typeof schema.pattern !== "string") fail("'pattern' must be a string", `${pointer}/pattern`);
  try {
    new RegExp(schema.pattern, "u");
  } catch {
    try {
      new RegExp(schema.pattern);
    } catch {
      fail(`'pattern' ${JSON.stringify(schema.pattern)} is not a valid regular expression`, `${pointer}/pattern`);
    }
  }
  try {
    parsePattern(schema.pattern);
  } catch (error) {
    if (!(error instanceof PatternError)) throw error;
    if (error instanceof PatternLimitError)
      throw new UnsupportedSchemaError(`'pattern' has ${error.message}`, `${pointer}/pattern`);
    // Beside a format we write, the format's grammar writes the value and the pattern checks it after.
    if (typeof format !== "string" || !knownFormat(format))
      throw new UnsupportedSchemaError(
        `'pattern' uses ${error.message}, which a grammar cannot enforce; rewrite the pattern without it`,
        `${pointer}/pattern`,
        "pattern",
      );
  }
}

/** `properties` (each a schema), `required` (each declared), `additionalProperties` and `propertyNames`. */
function checkObjectKeywords(schema: SchemaObject, root: unknown, pointer: string, depth: number): void {
  if (schema.properties !== undefined) {
    if (!isObject(schema.properties)) fail("'properties' must be an object", `${pointer}/properties`);
    for (const [name, child] of Object.entries(schema.properties))
      checkSchema(child, root, `${pointer}/properties/${name}`, depth + 1);
  }
  if (schema.required !== undefined) {
    const properties = isObject(schema.properties) ? schema.properties : {};
    if (!Array.isArray(schema.required)) fail("'required' must be a list of names", `${pointer}/required`);
    for (const name of schema.required) {
      if (typeof name !== "string" || !Object.hasOwn(properties, name))
        fail(`required property ${JSON.stringify(name)} is not declared in 'properties'`, `${pointer}/required`);
    }
  }
  const additional = schema.additionalProperties;
  if (additional !== undefined && typeof additional !== "boolean")
    checkSchema(additional, root, `${pointer}/additionalProperties`, depth + 1);
  if (schema.propertyNames !== undefined) {
    const names = schema.propertyNames;
    checkSchema(names, root, `${pointer}/propertyNames`, depth + 1);
    if (isObject(names)) {
      const stringOnly = Object.keys(names).every(
        (keyword) =>
          isAnnotation(keyword) ||
          ["type", "pattern", "format", "minLength", "maxLength", "enum", "const"].includes(keyword),
      );
      if (!stringOnly || (names.type !== undefined && names.type !== "string"))
        fail(
          "'propertyNames' may use only string keywords (pattern, format, minLength, maxLength, enum, const)",
          `${pointer}/propertyNames`,
        );
    }
  }
}

/** The schemas inside a schema: items, the combinators, the definitions, and where `$ref` points. */
function checkSubschemas(schema: SchemaObject, root: unknown, pointer: string, depth: number): void {
  const { prefix, rest } = arrayParts(schema);
  const prefixName = Array.isArray(schema.items) ? "items" : "prefixItems";
  prefix.forEach((child, index) => checkSchema(child, root, `${pointer}/${prefixName}/${index}`, depth + 1));
  if (schema.prefixItems !== undefined && !Array.isArray(schema.prefixItems))
    fail("'prefixItems' must be a list of schemas", `${pointer}/prefixItems`);
  if (typeof rest !== "boolean")
    checkSchema(rest, root, `${pointer}/${Array.isArray(schema.items) ? "additionalItems" : "items"}`, depth + 1);
  for (const combinator of ["anyOf", "oneOf", "allOf"] as const) {
    const list = schema[combinator];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.length === 0)
      fail(`'${combinator}' must be a non-empty list`, `${pointer}/${combinator}`);
    const check = (child: unknown, index: number) =>
      checkSchema(child, root, `${pointer}/${combinator}/${index}`, depth + 1);
    if (combinator === "allOf") list.forEach(check);
    else checkBranches(list, check);
  }
  if (schema.anyOf !== undefined && schema.oneOf !== undefined)
    fail("'anyOf' and 'oneOf' in one schema are not supported; nest one inside the other", `${pointer}/oneOf`);
  for (const container of ["$defs", "definitions"] as const) {
    const definitions = schema[container];
    if (definitions === undefined) continue;
    if (!isObject(definitions)) fail(`'${container}' must be an object`, `${pointer}/${container}`);
    for (const [name, child] of Object.entries(definitions))
      checkSchema(child, root, `${pointer}/${container}/${name}`, depth + 1);
  }
  if (schema.$ref !== undefined) {
    if (typeof schema.$ref !== "string") fail("'$ref' must be a string", `${pointer}/$ref`);
    resolveReference(root, schema.$ref, `${pointer}/$ref`);
  }
}

/** Every branch passes, or fails only on a pattern no grammar expresses while some other branch passes. */
function checkBranches(branches: unknown[], check: (child: unknown, index: number) => void): void {
  let written = 0;
  let unwritten: UnsupportedSchemaError | undefined;
  branches.forEach((branch, index) => {
    try {
      check(branch, index);
      written++;
    } catch (error) {
      if (!(error instanceof UnsupportedSchemaError && error.kind === "pattern")) throw error;
      unwritten ??= error;
    }
  });
  if (written === 0 && unwritten) throw unwritten;
}

/** Whether a branch is left unwritten: its pattern uses what no grammar expresses (checked to pass otherwise). */
export function unwritable(branch: unknown, root: unknown): boolean {
  try {
    checkSchema(branch, root);
    return false;
  } catch (error) {
    if (error instanceof UnsupportedSchemaError && error.kind === "pattern") return true;
    throw error;
  }
}

/**
 * What a branch can be, for telling branches apart: its types, its fixed values when it has
 * them, and its tags (a required property's fixed values, by name). Values are kept as their JSON.
 */
interface Shape {
  types: Set<string>;
  values?: Set<string>;
  tags: Map<string, Set<string>>;
}

const listedValues = (values: unknown[]) => new Set(values.map((value) => JSON.stringify(value)));

function shape(schema: unknown, root: unknown): Shape {
  let current = schema;
  for (let hops = 0; isObject(current) && typeof current.$ref === "string" && hops < 8; hops++)
    current = resolveReference(root, current.$ref, "");
  if (!isObject(current)) return { types: new Set(types), tags: new Map() };
  const values = current.const !== undefined ? [current.const] : Array.isArray(current.enum) ? current.enum : undefined;
  const listed = values ? values.map(jsonType) : typesOf(current);
  const tags = new Map<string, Set<string>>();
  const required = new Set(Array.isArray(current.required) ? current.required : []);
  for (const [name, property] of Object.entries(isObject(current.properties) ? current.properties : {})) {
    if (!required.has(name) || !isObject(property)) continue;
    if (property.const !== undefined) tags.set(name, listedValues([property.const]));
    else if (Array.isArray(property.enum)) tags.set(name, listedValues(property.enum));
  }
  const typeSet = new Set(
    listed.length ? listed.flatMap((type) => (type === "number" ? ["number", "integer"] : [type])) : types,
  );
  return { types: typeSet, ...(values ? { values: listedValues(values) } : {}), tags };
}

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

/** Whether two sets share nothing, reading the smaller. */
function disjoint(a: Set<string>, b: Set<string>): boolean {
  const [smaller, larger] = a.size <= b.size ? [a, b] : [b, a];
  for (const key of smaller) if (larger.has(key)) return false;
  return true;
}

/** Object branches compared pair by pair at most: beyond, one property must tell them all apart. */
const maxPairedObjects = 64;

/**
 * `oneOf` is read as `anyOf`, which is right only when no value matches two branches: two that
 * list their values list none in common; any other two share no type, or only `object`, and
 * then differ in a required property's fixed values. Each step is linear in the branches' size,
 * and pairs are compared only among at most `maxPairedObjects` object branches.
 */
function checkDisjoint(branches: unknown[], root: unknown, pointer: string): void {
  const shapes = branches.map((branch) => shape(branch, root));
  const overlap = (one: number, other: number): never =>
    fail(
      `'oneOf' branches ${Math.min(one, other)} and ${Math.max(one, other)} can match the same value; use 'anyOf', or tell them apart by type or by a required property with different 'const' values`,
      pointer,
    );
  checkListedValues(shapes, overlap);
  checkSharedTypes(shapes, overlap);
  checkObjectBranches(shapes, overlap, pointer);
}

/** No value is listed by two branches. */
function checkListedValues(shapes: Shape[], overlap: (one: number, other: number) => never): void {
  const lister = new Map<string, number>();
  shapes.forEach((shape, index) => {
    for (const key of shape.values ?? []) {
      const first = lister.get(key);
      if (first === undefined) lister.set(key, index);
      else if (first !== index) overlap(first, index);
    }
  });
}

/** A branch that lists no values shares no type but `object` with any other. */
function checkSharedTypes(shapes: Shape[], overlap: (one: number, other: number) => never): void {
  const holders = new Map<string, number[]>();
  shapes.forEach((shape, index) => {
    for (const type of shape.types) {
      if (type === "object") continue;
      if (!holders.has(type)) holders.set(type, []);
      holders.get(type)!.push(index);
    }
  });
  for (const indices of holders.values()) {
    const open = indices.find((index) => shapes[index]!.values === undefined);
    if (open !== undefined && indices.length > 1)
      overlap(
        open,
        indices.find((index) => index !== open)!,
      );
  }
}

/** Object branches, where one of two lists no values, differ in a required property's fixed values. */
function checkObjectBranches(shapes: Shape[], overlap: (one: number, other: number) => never, pointer: string): void {
  const objects = shapes.flatMap((shape, index) => (shape.types.has("object") ? [index] : []));
  if (objects.every((index) => shapes[index]!.values !== undefined)) return;
  if (discriminated(objects.map((index) => shapes[index]!))) return;
  if (objects.length > maxPairedObjects)
    fail(
      `'oneOf' has ${objects.length} object branches and no required property whose fixed values differ in each; use 'anyOf', or give every branch such a property (a 'const' of its own)`,
      pointer,
    );
  for (const [position, one] of objects.entries())
    for (const other of objects.slice(position + 1)) {
      const [a, b] = [shapes[one]!, shapes[other]!];
      if (a.values !== undefined && b.values !== undefined) continue;
      const tagged = [...a.tags].some(([name, values]) => {
        const others = b.tags.get(name);
        return others !== undefined && disjoint(values, others);
      });
      if (!tagged) overlap(one, other);
    }
}

/** Whether one property, required in every shape, has fixed values no two shapes share. */
function discriminated(shapes: Shape[]): boolean {
  const counts = new Map<string, number>();
  for (const shape of shapes) for (const name of shape.tags.keys()) counts.set(name, (counts.get(name) ?? 0) + 1);
  return [...counts].some(([name, count]) => {
    if (count < shapes.length) return false;
    const owner = new Map<string, Shape>();
    return shapes.every((shape) =>
      [...shape.tags.get(name)!].every((key) => {
        if (owner.has(key) && owner.get(key) !== shape) return false;
        owner.set(key, shape);
        return true;
      }),
    );
  });
}
