/**
 * OpenAI's strict-mode rules for a schema (`strict: true` on a `json_schema` response format or a
 * function): the root is an object, every schema says what its values are (a `type`, or a
 * composition, reference, `enum` or `const`), and every object schema sets
 * `additionalProperties: false`, has `properties`, and lists each of them in `required`. A schema
 * that breaks one is refused by the hosted API, so it is refused here too (the HTTP layer words it
 * as OpenAI does), at the first place a walk in the schema's own key order meets. The walk visits
 * each subschema once.
 *
 * One form goes beyond OpenAI's rules, because the grammar holds it exactly: a map, an object
 * schema with no `properties` whose `additionalProperties` is a schema (pydantic's
 * `dict[str, int]`). It is taken, its values held to the same rules, and its place reported, so an
 * app can tell that the hosted API would refuse the schema.
 */
import { isObject, typesOf, type JsonSchema, type SchemaObject } from "./schema.js";

export type StrictRule =
  | { kind: "rootType"; type: string }
  | { kind: "additionalProperties" }
  | { kind: "properties" }
  | { kind: "typeKey" }
  | { kind: "missingRequired"; key: string }
  | { kind: "extraRequired"; key: string };

interface StrictViolation {
  /** The keys from the root to the schema at fault (OpenAI's `context`). */
  context: string[];
  rule: StrictRule;
}

/** What the walk found: the first rule broken, and the maps taken beyond OpenAI's rules (their contexts). */
export interface StrictCheck {
  violation: StrictViolation | null;
  maps: string[][];
}

/** Deeper schemas are not walked here: the schema check refuses them before they are used. */
const maxStrictDepth = 32;

/** Where each keyword keeps its subschemas: one, a list of them, or a map of named ones. */
const subschemaKeys: Record<string, "one" | "list" | "map"> = {
  properties: "map",
  items: "one",
  prefixItems: "list",
  anyOf: "list",
  oneOf: "list",
  allOf: "list",
  $defs: "map",
  definitions: "map",
  additionalProperties: "one",
};

/** The first strict-mode rule `schema` breaks (null when it keeps them all), and the maps it holds. */
export function strictCheck(schema: JsonSchema): StrictCheck {
  const type = isObject(schema) ? schema.type : undefined;
  if (type !== "object") {
    const got = typeof type === "string" ? type : type === undefined ? "None" : JSON.stringify(type);
    return { violation: { context: [], rule: { kind: "rootType", type: got } }, maps: [] };
  }
  const maps: string[][] = [];
  return { violation: objectViolation(schema as SchemaObject, [], 0, maps), maps };
}

/** What says what a schema's values are; one with none of them (`{}`, or only a description) allows any value. */
const typing = ["type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"];

function objectViolation(
  schema: SchemaObject,
  context: string[],
  depth: number,
  maps: string[][],
): StrictViolation | null {
  if (!typing.some((keyword) => keyword in schema)) return { context, rule: { kind: "typeKey" } };
  if (typesOf(schema).includes("object")) {
    if (isMap(schema)) maps.push(context);
    else {
      const rule = objectRule(schema);
      if (rule) return { context, rule };
    }
  }
  if (depth >= maxStrictDepth) return null;
  for (const [keyword, value] of Object.entries(schema)) {
    const violation = subschemasViolation(keyword, value, context, depth, maps);
    if (violation) return violation;
  }
  return null;
}

/** A map: values of one schema under any names, and no declared properties. */
function isMap(schema: SchemaObject): boolean {
  const declared = isObject(schema.properties) ? Object.keys(schema.properties).length : 0;
  return isObject(schema.additionalProperties) && declared === 0;
}

/** A keyword's subschemas, each with its name in the context (none for `items`' one schema). */
function subschemasOf(kind: "one" | "list" | "map", value: unknown): [string | null, unknown][] {
  if (kind === "one") return [[null, value]];
  if (kind === "list") return Array.isArray(value) ? value.map((item, index) => [String(index), item]) : [];
  return isObject(value) ? Object.entries(value) : [];
}

function subschemasViolation(keyword: string, value: unknown, context: string[], depth: number, maps: string[][]) {
  const kind = subschemaKeys[keyword];
  if (kind === undefined) return null;
  for (const [name, child] of subschemasOf(kind, value)) {
    if (!isObject(child)) continue;
    const violation = objectViolation(
      child,
      name === null ? [...context, keyword] : [...context, keyword, name],
      depth + 1,
      maps,
    );
    if (violation) return violation;
  }
  return null;
}

/** The rule an object schema breaks: `additionalProperties: false` first, then `properties`, then `required`. */
function objectRule(schema: SchemaObject): StrictRule | null {
  if (schema.additionalProperties !== false) return { kind: "additionalProperties" };
  if (!isObject(schema.properties)) return { kind: "properties" };
  const names = Object.keys(schema.properties);
  const required: unknown[] = Array.isArray(schema.required) ? schema.required : [];
  const listed = new Set(required);
  const missing = names.find((name) => !listed.has(name));
  if (missing !== undefined) return { kind: "missingRequired", key: missing };
  const declared = new Set<unknown>(names);
  const extra = required.find((name) => !declared.has(name));
  return extra === undefined ? null : { kind: "extraRequired", key: String(extra) };
}
