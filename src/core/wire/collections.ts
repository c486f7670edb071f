/**
 * Lists and dictionaries in a client's request, read to their first refused item.
 *
 * zod checks every item of an array or a record and keeps an issue for each: an 8 MiB body of
 * four million wrong messages cost 6 s and 2.4 GB of memory in the worker that serves every tab,
 * and a million wrong `logit_bias` values 1.8 s. Only the first issue is ever reported
 * (http/validate.ts), so these stop there: the items after it are never read, and nothing is
 * copied before they are. Bounds are checked first, before any item.
 */
import { z } from "zod";

type Refuse = (issue: object) => never;

/** Thrown to stop reading at the first refused item; never leaves this module. */
class Refused {
  constructor(readonly issue: object) {}
}

/** Runs `check` with a way to refuse the whole value with one issue (zod's shape), as a zod schema. */
function readFirstFailure<Output>(check: (input: unknown, refuse: Refuse) => Output) {
  return z.unknown().transform((input, context): Output => {
    try {
      return check(input, (issue) => {
        throw new Refused(issue);
      });
    } catch (error) {
      if (!(error instanceof Refused)) throw error;
      context.issues.push({ input, ...error.issue } as never);
      return z.NEVER;
    }
  });
}

/** `item`'s result, or a refusal of its first issue, at `path` below the collection. */
function parseAt<Item extends z.ZodType>(item: Item, value: unknown, key: PropertyKey, refuse: Refuse): z.output<Item> {
  const result = item.safeParse(value);
  if (result.success) return result.data;
  const [first] = result.error.issues;
  return refuse({ ...first, path: [key, ...first!.path], input: value });
}

/** `z.array(item)`, with `min` and `max` items, read to its first refused item. */
export function list<Item extends z.ZodType>(item: Item, bounds: { min?: number; max?: number } = {}) {
  return readFirstFailure((values, refuse): z.output<Item>[] => {
    if (!Array.isArray(values)) return refuse({ code: "invalid_type", expected: "array" });
    if (bounds.max !== undefined && values.length > bounds.max)
      return refuse({ code: "too_big", origin: "array", maximum: bounds.max, inclusive: true });
    if (bounds.min !== undefined && values.length < bounds.min)
      return refuse({ code: "too_small", origin: "array", minimum: bounds.min, inclusive: true });
    return values.map((value, index) => parseAt(item, value, index, refuse));
  });
}

/**
 * `z.record(z.string(), value)`, read to its first refused entry. Unlike `z.record`, a key named
 * `__proto__` is kept as the own property it is in the JSON, never dropped.
 * `maxEntries` and `maxKeyLength` (in characters, as OpenAI counts them) are OpenAI's refusals
 * "too many properties" and "Invalid property name … is too long".
 */
export function dictionary<Value extends z.ZodType>(
  value: Value,
  bounds: { maxEntries?: number; maxKeyLength?: number } = {},
) {
  return readFirstFailure((input, refuse): Record<string, z.output<Value>> => {
    if (typeof input !== "object" || input === null || Array.isArray(input))
      return refuse({ code: "invalid_type", expected: "object" });
    const entries = Object.entries(input);
    if (bounds.maxEntries !== undefined && entries.length > bounds.maxEntries)
      return refuse({ code: "too_big", origin: "object", maximum: bounds.maxEntries, inclusive: true });
    const parsed: Record<string, z.output<Value>> = {};
    for (const [key, item] of entries) {
      const length = characters(key);
      if (bounds.maxKeyLength !== undefined && length > bounds.maxKeyLength)
        return refuse({
          code: "custom",
          path: [key],
          params: { propertyName: key, maximum: bounds.maxKeyLength, length },
        });
      Object.defineProperty(parsed, key, {
        value: parseAt(value, item, key, refuse),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return parsed;
  });
}

/** A string's length in characters (code points), as OpenAI's limits count it. */
export function characters(text: string): number {
  let count = 0;
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    // A high surrogate followed by a low one is one character.
    if (unit >= 0xd800 && unit <= 0xdbff && index + 1 < text.length) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) index++;
    }
    count++;
  }
  return count;
}
