/**
 * Checks a finished value against a schema, for what a grammar enforces only in part: number
 * bounds and `multipleOf`, `uniqueItems`, a pattern beside a format, lengths beside a pattern.
 * It checks every keyword, so a value the grammar let through by mistake is caught too. The
 * first violation is named with its place in the value.
 */
import { hasFormat } from "./formats.js";
import {
  arrayParts,
  effective,
  isObject,
  numberKeyword,
  resolveReference,
  type JsonSchema,
  type SchemaObject,
} from "./schema.js";
import { patternMatches } from "./strings.js";

export interface Violation {
  /** Where in the value, as a JSON pointer. */
  at: string;
  message: string;
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function equalJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a))
    return a.length === (b as unknown[]).length && a.every((item, index) => equalJson(item, (b as unknown[])[index]));
  const keys = Object.keys(a as object);
  return (
    keys.length === Object.keys(b as object).length &&
    keys.every(
      (key) => Object.hasOwn(b as object, key) && equalJson((a as SchemaObject)[key], (b as SchemaObject)[key]),
    )
  );
}

function hasType(type: string, value: unknown): boolean {
  if (type === "integer") return typeof value === "number" && Number.isInteger(value);
  return typeOf(value) === type;
}

function isMultiple(value: number, step: number): boolean {
  const quotient = value / step;
  return Math.abs(quotient - Math.round(quotient)) <= 1e-9 * Math.max(1, Math.abs(quotient));
}

/**
 * What is known of each schema at each place in the value. A value is a tree, so a place names
 * one part of it. Without it, `anyOf` branches that each lead back to one definition would check
 * the same part once per path through them: exponential in the value's depth, or in a `$ref`
 * chain's length, where a part breaks every branch.
 */
type Memo = Map<JsonSchema, Map<string, Violation | null>>;

/** The first way `value` breaks `schema`, or null: each schema checked at each place once. */
export function validate(
  schema: JsonSchema,
  value: unknown,
  root: JsonSchema = schema,
  at = "",
  memo: Memo = new Map(),
): Violation | null {
  let known = memo.get(schema);
  if (known === undefined) memo.set(schema, (known = new Map()));
  if (known.has(at)) return known.get(at)!;
  const found = firstViolation(schema, value, root, at, memo);
  known.set(at, found);
  return found;
}

function firstViolation(
  schema: JsonSchema,
  value: unknown,
  root: JsonSchema,
  at: string,
  memo: Memo,
): Violation | null {
  if (schema === true) return null;
  if (schema === false) return { at, message: "no value is allowed here" };
  const current = effective(schema, "");
  if (typeof current.$ref === "string")
    return validate(resolveReference(root, current.$ref, ""), value, root, at, memo);
  if (current.const !== undefined && !equalJson(current.const, value))
    return { at, message: `must be ${JSON.stringify(current.const)}` };
  if (Array.isArray(current.enum) && !current.enum.some((option) => equalJson(option, value)))
    return { at, message: `must be one of ${JSON.stringify(current.enum)}` };
  if (
    Array.isArray(current.anyOf) &&
    !current.anyOf.some((branch) => validate(branch as JsonSchema, value, root, at, memo) === null)
  )
    return { at, message: "matches none of the allowed schemas" };
  if (current.type !== undefined) {
    const listed = (Array.isArray(current.type) ? current.type : [current.type]) as string[];
    if (!listed.some((type) => hasType(type, value))) return { at, message: `must be of type ${listed.join(" or ")}` };
  }
  if (typeof value === "string") return validateString(current, value, at);
  if (typeof value === "number") return validateNumber(current, value, at);
  if (Array.isArray(value)) return validateArray(current, value, root, at, memo);
  if (isObject(value)) return validateObject(current, value, root, at, memo);
  return null;
}

function validateString(schema: SchemaObject, value: string, at: string): Violation | null {
  const length = [...value].length;
  const minLength = numberKeyword(schema, "minLength");
  const maxLength = numberKeyword(schema, "maxLength");
  if (minLength !== undefined && length < minLength)
    return { at, message: `must be at least ${minLength} characters (minLength)` };
  if (maxLength !== undefined && length > maxLength)
    return { at, message: `must be at most ${maxLength} characters (maxLength)` };
  if (typeof schema.pattern === "string" && !patternMatches(schema.pattern, value))
    return { at, message: `must match the pattern ${JSON.stringify(schema.pattern)}` };
  if (typeof schema.format === "string" && !hasFormat(schema.format, value))
    return { at, message: `must be a valid ${schema.format} (format)` };
  return null;
}

function validateNumber(schema: SchemaObject, value: number, at: string): Violation | null {
  const checks: [string, (bound: number) => boolean, string][] = [
    ["minimum", (bound) => value >= bound, "at least"],
    ["exclusiveMinimum", (bound) => value > bound, "above"],
    ["maximum", (bound) => value <= bound, "at most"],
    ["exclusiveMaximum", (bound) => value < bound, "below"],
  ];
  for (const [keyword, holds, words] of checks) {
    const bound = numberKeyword(schema, keyword);
    if (bound !== undefined && !holds(bound)) return { at, message: `must be ${words} ${bound} (${keyword})` };
  }
  const step = numberKeyword(schema, "multipleOf");
  if (step !== undefined && !isMultiple(value, step))
    return { at, message: `must be a multiple of ${step} (multipleOf)` };
  return null;
}

function validateArray(
  schema: SchemaObject,
  value: unknown[],
  root: JsonSchema,
  at: string,
  memo: Memo,
): Violation | null {
  const minItems = numberKeyword(schema, "minItems");
  const maxItems = numberKeyword(schema, "maxItems");
  if (minItems !== undefined && value.length < minItems)
    return { at, message: `must have at least ${minItems} items (minItems)` };
  if (maxItems !== undefined && value.length > maxItems)
    return { at, message: `must have at most ${maxItems} items (maxItems)` };
  const { prefix, rest } = arrayParts(schema);
  for (const [index, item] of value.entries()) {
    const itemSchema = (index < prefix.length ? prefix[index] : rest) as JsonSchema;
    const violation = validate(itemSchema, item, root, `${at}/${index}`, memo);
    if (violation) return violation;
  }
  if (schema.uniqueItems === true) {
    const seen = new Set<string>();
    for (const [index, item] of value.entries()) {
      const key = JSON.stringify(canonical(item));
      if (seen.has(key)) return { at: `${at}/${index}`, message: "repeats an earlier item (uniqueItems)" };
      seen.add(key);
    }
  }
  return null;
}

/** Keys sorted, so equal objects written in different orders compare equal. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (!isObject(value)) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, canonical(value[key])]),
  );
}

function validateObject(
  schema: SchemaObject,
  value: SchemaObject,
  root: JsonSchema,
  at: string,
  memo: Memo,
): Violation | null {
  const properties = isObject(schema.properties) ? schema.properties : {};
  const keys = Object.keys(value);
  for (const name of Array.isArray(schema.required) ? (schema.required as string[]) : [])
    if (!Object.hasOwn(value, name))
      return { at, message: `must have the property ${JSON.stringify(name)} (required)` };
  const minProperties = numberKeyword(schema, "minProperties");
  const maxProperties = numberKeyword(schema, "maxProperties");
  if (minProperties !== undefined && keys.length < minProperties)
    return { at, message: `must have at least ${minProperties} properties (minProperties)` };
  if (maxProperties !== undefined && keys.length > maxProperties)
    return { at, message: `must have at most ${maxProperties} properties (maxProperties)` };
  for (const key of keys) {
    const place = `${at}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`;
    if (schema.propertyNames !== undefined) {
      // A name shares its property's place, so it has a memo of its own.
      const violation = validate(schema.propertyNames as JsonSchema, key, root, place, new Map());
      if (violation) return { at: place, message: `has a name that ${violation.message} (propertyNames)` };
    }
    const declared = Object.hasOwn(properties, key);
    const propertySchema = declared ? properties[key] : (schema.additionalProperties ?? true);
    if (propertySchema === false) return { at: place, message: "is not an allowed property (additionalProperties)" };
    const violation = validate(propertySchema as JsonSchema, value[key], root, place, memo);
    if (violation) return violation;
  }
  return null;
}
