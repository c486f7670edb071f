/**
 * Recursion a grammar cannot write. A `$ref` that comes back to itself before a value opens (a
 * `{` or `[` in between) is left recursion, which llama.cpp refuses and no sampler can unwind;
 * and a recursion with no way out (a property we always write that holds its own object again)
 * has no finite value at all. Both are a 400 before any grammar is built.
 */
import {
  arrayParts,
  effective,
  isObject,
  numberKeyword,
  onlyAnnotations,
  resolveReference,
  typesOf,
  UnsupportedSchemaError,
  type JsonSchema,
} from "./schema.js";

/** Refs followed in at most this many rounds: deeper chains of definitions are refused. */
const maxRounds = 64;

function collectReferences(schema: unknown, into: Set<string>): void {
  if (Array.isArray(schema)) schema.forEach((item) => collectReferences(item, into));
  else if (isObject(schema))
    for (const [keyword, value] of Object.entries(schema)) {
      if (keyword === "$ref" && typeof value === "string") into.add(value);
      else if (keyword !== "enum" && keyword !== "const" && keyword !== "default" && keyword !== "examples")
        collectReferences(value, into);
    }
}

/** The schemas reached without writing a character: through `$ref`, `allOf`, `anyOf` and `oneOf`. */
function transparent(schema: unknown): unknown[] {
  if (!isObject(schema)) return [];
  return ["anyOf", "oneOf", "allOf"].flatMap((keyword) => (Array.isArray(schema[keyword]) ? schema[keyword] : []));
}

function checkLeftRecursion(root: JsonSchema, references: Set<string>): void {
  const state = new Map<string, "open" | "done">();
  const visit = (schema: unknown): void => {
    if (isObject(schema) && typeof schema.$ref === "string") {
      const reference = schema.$ref;
      if (state.get(reference) === "open")
        throw new UnsupportedSchemaError(
          `'$ref' ${JSON.stringify(reference)} refers back to itself before any value is written (left recursion); put the recursion inside a property or an item`,
          "",
        );
      if (state.get(reference) !== "done") {
        state.set(reference, "open");
        visit(resolveReference(root, reference, ""));
        state.set(reference, "done");
      }
    }
    transparent(schema).forEach(visit);
  };
  visit(root);
  for (const reference of references) visit({ $ref: reference });
}

/** Whether the grammar can write some finite value of `schema`, given what is known of each reference. */
function writable(schema: unknown, known: Map<string, boolean>): boolean {
  if (!isObject(schema) || onlyAnnotations(schema)) return true;
  const current = effective(schema, "");
  if (current !== schema) return writable(current, known);
  if (typeof current.$ref === "string") return known.get(current.$ref) ?? false;
  if (current.const !== undefined || Array.isArray(current.enum)) return true;
  if (Array.isArray(current.anyOf)) return current.anyOf.some((branch) => writable(branch, known));
  const types = typesOf(current);
  return types.length === 0 || types.some((type) => typeWritable(type, current, known));
}

function typeWritable(type: string, schema: Record<string, unknown>, known: Map<string, boolean>): boolean {
  if (type === "array") {
    const { prefix, rest } = arrayParts(schema);
    const written = prefix.slice(0, numberKeyword(schema, "maxItems") ?? Infinity);
    const more = Math.max(0, (numberKeyword(schema, "minItems") ?? 0) - written.length);
    return written.every((item) => writable(item, known)) && (more === 0 || writable(rest, known));
  }
  if (type !== "object") return true;
  // Every declared property is written (past maxProperties, the required ones), so each must end.
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  let room = (numberKeyword(schema, "maxProperties") ?? Infinity) - required.size;
  const declared = Object.entries(isObject(schema.properties) ? schema.properties : {});
  const written = declared.filter(([name]) => required.has(name) || room-- > 0);
  const more = Math.max(0, (numberKeyword(schema, "minProperties") ?? 0) - written.length);
  const extra = isObject(schema.additionalProperties) ? schema.additionalProperties : true;
  return written.every(([, child]) => writable(child, known)) && (more === 0 || writable(extra, known));
}

/** Refuses a schema with left recursion, or whose recursion leaves no finite value to write. */
export function checkFinite(root: JsonSchema): void {
  const references = new Set<string>();
  collectReferences(root, references);
  checkLeftRecursion(root, references);
  // Least fixed point: a reference is writable once its target is, given those already known.
  const known = new Map<string, boolean>();
  let changed = true;
  // One round past the limit: a chain of exactly `maxRounds` still settles, a longer one does not.
  for (let round = 0; changed && round <= maxRounds; round++) {
    changed = false;
    for (const reference of references) {
      if (known.get(reference)) continue;
      if (writable(resolveReference(root, reference, ""), known)) {
        known.set(reference, true);
        changed = true;
      }
    }
  }
  // Still learning after the last round: a chain of more definitions than we follow, not a loop.
  if (changed)
    throw new UnsupportedSchemaError(
      `'$ref' chains run through more than ${maxRounds} definitions; shorten them by writing the inner definitions in place`,
      "",
    );
  if (!writable(root, known))
    throw new UnsupportedSchemaError(
      "the schema has no finite value to write: a '$ref' recurses with no way out (every declared property is written); make the recursive property nullable or a list, or leave it out",
      "",
    );
}
