/**
 * A valid instance of a schema, for the deterministic engine: every keyword the grammar and the
 * validator know is satisfied, so an app's CI exercises its schemas as they are.
 */
import { unwritable } from "./check.js";
import {
  patternSamplerWithin,
  samplePattern,
  tableCellsPerSchema,
  type LengthSampler,
  type RegexBranch,
  type TableBudget,
} from "./regex.js";
import {
  arrayParts,
  effective,
  isObject,
  longestWritten,
  numberKeyword,
  resolveReference,
  typesOf,
  type JsonSchema,
  type SchemaObject,
} from "./schema.js";
import { numberBounds } from "./schema-grammar.js";
import { stringSource } from "./strings.js";
import { validate } from "./validate.js";

type Random = () => number;
const words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];

const pick = <T>(list: readonly T[], random: Random): T => list[Math.floor(random() * list.length)]!;

/**
 * How much JSON text a sample may still spell out. A schema's smallest instance can be
 * exponential in its size (each level's `$ref` to the next, twice), so writing stops once the
 * budget is spent: every array and object then closes early, and `cut` says the instance is not
 * whole. The deterministic engine reports that as running out of tokens.
 */
export class SampleBudget {
  #left: number;
  cut = false;
  constructor(characters: number) {
    this.#left = characters;
  }
  /** Spends `characters`; false, and `cut` set, once nothing is left. */
  spend(characters: number): boolean {
    this.#left -= characters;
    if (this.#left < 0) this.cut = true;
    return !this.cut;
  }
}

/**
 * A valid instance of `schema`, chosen by `random` (in [0, 1)): whole unless `budget` ran out
 * (then `budget.cut` is set).
 */
export function sampleSchema(schema: JsonSchema, random: Random, budget = new SampleBudget(Infinity)): unknown {
  return sampleChild(
    schema,
    { random, budget, root: schema, writable: new Map(), patterns: new Map(), tables: { cells: tableCellsPerSchema } },
    0,
  );
}

interface Sampling {
  random: Random;
  budget: SampleBudget;
  root: JsonSchema;
  /** Each `anyOf`'s branches that can be written, found once: a list of 256 items visits it 256 times. */
  writable: Map<JsonSchema, JsonSchema[]>;
  /** Each pattern's sampler within its length bounds, tabulated once (see patternSamplerWithin). */
  patterns: Map<SchemaObject, LengthSampler | null | undefined>;
  tables: TableBudget;
}

/**
 * A `const` or `enum` value, as the schema gives it. A list or object among them spends its whole
 * length here (a leaf spends once returned): repeated by the arrays around it, it would
 * otherwise multiply past any budget.
 */
function literalValue(value: unknown, budget: SampleBudget): unknown {
  if (value !== null && typeof value === "object") budget.spend(JSON.stringify(value).length);
  return value;
}

/** A value and what it spends: containers spend as they fill, a leaf its own length. */
function sampleChild(schema: JsonSchema, sampling: Sampling, depth: number): unknown {
  const value = sampleValue(schema, sampling, depth);
  if (value === null || typeof value !== "object") sampling.budget.spend(JSON.stringify(value)?.length ?? 4);
  return value;
}

function sampleValue(schema: JsonSchema, sampling: Sampling, depth: number): unknown {
  const { random, root } = sampling;
  if (schema === true || !isObject(schema)) return depth > 3 ? null : { note: "any" };
  const current = effective(schema, "");
  if (typeof current.$ref === "string")
    return sampleValue(resolveReference(root, current.$ref, ""), sampling, depth + 1);
  if (current.const !== undefined) return literalValue(current.const, sampling.budget);
  if (Array.isArray(current.enum)) return literalValue(pick(current.enum, random), sampling.budget);
  if (Array.isArray(current.anyOf)) {
    let branches = sampling.writable.get(schema);
    if (branches === undefined) {
      branches = (current.anyOf as JsonSchema[]).filter((branch) => !unwritable(branch, root));
      sampling.writable.set(schema, branches);
    }
    // Deep in a recursive schema, the branch that ends it (a null, a leaf) comes first.
    const ending =
      branches.find((branch) => isObject(branch) && branch.type === "null") ??
      branches.find((branch) => !(isObject(branch) && typeof branch.$ref === "string"));
    const branch = depth > 4 && ending ? ending : pick(branches, random);
    return sampleValue(branch, sampling, depth + 1);
  }
  const listed = typesOf(current);
  // Prefer a non-null type, so optional-looking values still say something.
  const type = listed.length === 0 ? "string" : (listed.find((candidate) => candidate !== "null") ?? "null");
  switch (type) {
    case "string":
      return sampleString(current, sampling);
    case "number":
    case "integer":
      return sampleNumber(current, type === "integer", random);
    case "boolean":
      return random() < 0.5;
    case "null":
      return null;
    case "array":
      return sampleArray(current, sampling, depth);
    default:
      return sampleObject(current, sampling, depth);
  }
}

function sampleString(schema: SchemaObject, sampling: Sampling): string {
  const { random } = sampling;
  const source = stringSource(schema);
  if (source.kind === "any") return pick(words, random);
  if (source.kind === "pattern") {
    // Beside length bounds, strings of those lengths; the first of a few that also fits the rest.
    const sample = lengthBound(schema) ? patternSampler(schema, source.branches, sampling) : null;
    let candidate = "";
    for (let attempt = 0; attempt < 20; attempt++) {
      candidate = sample ? sample(random) : samplePattern(source.branches, random);
      if (validate(schema, candidate) === null) break;
    }
    return candidate;
  }
  const longest = Math.min(source.max ?? source.min + 12, longestWritten.characters);
  const length = source.min + Math.floor(random() * (Math.min(longest, source.min + 12) - source.min + 1));
  let text = "";
  while (text.length < length) text += `${pick(words, random)} `;
  return text.slice(0, length);
}

function lengthBound(schema: SchemaObject): boolean {
  return numberKeyword(schema, "minLength") !== undefined || numberKeyword(schema, "maxLength") !== undefined;
}

function patternSampler(
  schema: SchemaObject,
  branches: RegexBranch[],
  sampling: Sampling,
): LengthSampler | null | undefined {
  if (!sampling.patterns.has(schema)) {
    const min = numberKeyword(schema, "minLength") ?? 0;
    const max = numberKeyword(schema, "maxLength") ?? Infinity;
    sampling.patterns.set(schema, patternSamplerWithin(branches, min, max, sampling.tables));
  }
  return sampling.patterns.get(schema)!;
}

function sampleNumber(schema: SchemaObject, integer: boolean, random: Random): number {
  const bounds = numberBounds(schema, integer);
  const step = numberKeyword(schema, "multipleOf") ?? (integer ? 1 : undefined);
  // A window of about a hundred near zero, inside the bounds: readable values even for zod's ±2^53 integers.
  const lowest = bounds.minimum ?? -Infinity;
  const highest = bounds.maximum ?? Infinity;
  const low = lowest > 0 ? lowest : highest < 0 ? Math.max(lowest, highest - 100) : Math.max(lowest, 0);
  const high = Math.min(highest, low + 100);
  const fits = (value: number) =>
    validate(schema, value) === null && (!integer || Number.isInteger(value)) && Number.isFinite(value);
  const candidates: number[] = [];
  if (step !== undefined) {
    const first = Math.ceil(low / step);
    const last = Math.floor(high / step);
    const count = Math.max(0, Math.min(last - first, 1e9));
    const indices = Array.from({ length: 8 }, () => first + Math.floor(random() * (count + 1)));
    // A whole step's multiples are exact as they are; a decimal step's are rounded off its float error.
    const multiple = (index: number) =>
      Number.isInteger(step) ? index * step : Number((index * step).toPrecision(12));
    for (const index of [...indices, first, first + 1, last, last - 1]) candidates.push(multiple(index));
    // Validators that divide without a tolerance (ajv) see 37.19 / 0.01 as 3718.9999…: such values come last.
    candidates.sort((a, b) => Number(!Number.isInteger(a / step)) - Number(!Number.isInteger(b / step)));
  } else {
    candidates.push(Math.round((low + random() * (high - low)) * 100) / 100, (low + high) / 2, low, high);
  }
  return candidates.find(fits) ?? candidates[0]!;
}

function sampleArray(schema: SchemaObject, sampling: Sampling, depth: number): unknown[] {
  const { prefix, rest } = arrayParts(schema);
  const min = numberKeyword(schema, "minItems") ?? 0;
  const max = Math.min(numberKeyword(schema, "maxItems") ?? Infinity, longestWritten.items);
  const wanted = depth > 4 ? min : min + Math.floor(sampling.random() * 3) + (min === 0 ? 1 : 0);
  const count = Math.min(
    Math.max(wanted, Math.min(prefix.length, max)),
    max,
    rest === false ? prefix.length : Infinity,
  );
  const items: unknown[] = [];
  const seen = new Set<string>();
  for (let index = 0; index < count && sampling.budget.spend(1); index++) {
    const itemSchema = (index < prefix.length ? prefix[index] : rest) as JsonSchema;
    let item = sampleChild(itemSchema, sampling, depth + 1);
    // Unique items: draw again a few times; past a handful of tries, stop at the minimum.
    for (let attempt = 0; schema.uniqueItems === true && seen.has(JSON.stringify(item)) && attempt < 20; attempt++)
      item = sampleChild(itemSchema, sampling, depth + 1);
    if (schema.uniqueItems === true && seen.has(JSON.stringify(item))) {
      if (items.length >= min) break;
    }
    seen.add(JSON.stringify(item));
    items.push(item);
  }
  return items;
}

/** As JSON.parse makes it: a property named `__proto__` is an own property, not the prototype. */
function setOwn(object: Record<string, unknown>, name: string, value: unknown): void {
  Object.defineProperty(object, name, { value, enumerable: true, writable: true, configurable: true });
}

function sampleObject(schema: SchemaObject, sampling: Sampling, depth: number): Record<string, unknown> {
  const { random, budget } = sampling;
  const result: Record<string, unknown> = {};
  const declared = isObject(schema.properties) ? Object.entries(schema.properties) : [];
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  let optionalRoom = (numberKeyword(schema, "maxProperties") ?? Infinity) - required.size;
  // Deep down, optional properties are left out as arrays keep to their minimum: each level of a
  // schema that nests itself would otherwise multiply the instance.
  if (depth > 4 && numberKeyword(schema, "minProperties") === undefined) optionalRoom = 0;
  for (const [property, child] of declared)
    if ((required.has(property) || optionalRoom-- > 0) && budget.spend(property.length + 4))
      setOwn(result, property, sampleChild(child as JsonSchema, sampling, depth + 1));
  const additional = schema.additionalProperties;
  const valueSchema = isObject(additional)
    ? additional
    : declared.length === 0 && additional !== false
      ? null
      : undefined;
  if (valueSchema === undefined) return result;
  const have = Object.keys(result).length;
  const min = Math.max(0, (numberKeyword(schema, "minProperties") ?? 0) - have);
  const max = Math.max(0, (numberKeyword(schema, "maxProperties") ?? Infinity) - have);
  const count = Math.min(depth > 4 ? min : min + 1 + Math.floor(random() * 2), max);
  const names = isObject(schema.propertyNames) ? schema.propertyNames : null;
  let added = 0;
  for (let index = 0, attempts = 0; added < count && attempts < 50 && !budget.cut; attempts++) {
    const key = names
      ? String(sampleValue({ type: "string", ...names }, sampling, depth + 1))
      : `${pick(words, random)}_${++index}`;
    if (Object.hasOwn(result, key) || !budget.spend(key.length + 4)) continue;
    setOwn(result, key, valueSchema === null ? pick(words, random) : sampleChild(valueSchema, sampling, depth + 1));
    added++;
  }
  return result;
}
