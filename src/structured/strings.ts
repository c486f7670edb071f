/**
 * Where a string's grammar and samples come from: its format, its pattern, or its length bounds.
 * A format wins over a pattern beside it when the format's own strings match the pattern (zod
 * writes both for an email or a date-time, and its patterns use lookahead); otherwise the
 * pattern writes the value and the format is checked once it is finished.
 */
import { writtenFormats } from "./formats.js";
import {
  parsePattern,
  patternMatchesValue,
  PatternError,
  PatternLimitError,
  samplePattern,
  type RegexBranch,
} from "./regex.js";
import type { SchemaObject } from "./schema.js";

export type StringSource =
  { kind: "pattern"; branches: RegexBranch[] } | { kind: "length"; min: number; max: number | null } | { kind: "any" };

function firstSample(branches: RegexBranch[]): string {
  let state = 7;
  return samplePattern(branches, () => (state = (state * 16_807) % 2_147_483_647) / 2_147_483_647);
}

/**
 * Whether `value` matches `pattern`, by our own automaton (linear in the value, never a
 * backtracking engine on a caller's pattern). A pattern we cannot parse (lookaround) is only ever
 * accepted beside a format we write, as its definition (zod's), and is not run: true.
 */
export function patternMatches(pattern: string, value: string): boolean {
  let branches: RegexBranch[];
  try {
    branches = parsePattern(pattern);
  } catch (error) {
    // A pattern past our limits never gets this far: the schema's check refuses it.
    if (error instanceof PatternError && !(error instanceof PatternLimitError)) return true;
    throw error;
  }
  return patternMatchesValue(branches, value);
}

export function stringSource(schema: SchemaObject): StringSource {
  const format =
    typeof schema.format === "string" && Object.hasOwn(writtenFormats, schema.format)
      ? writtenFormats[schema.format]
      : undefined;
  const pattern = typeof schema.pattern === "string" ? schema.pattern : undefined;
  if (format !== undefined) {
    const branches = parsePattern(format);
    if (pattern === undefined || patternMatches(pattern, firstSample(branches))) return { kind: "pattern", branches };
  }
  if (pattern !== undefined) return { kind: "pattern", branches: parsePattern(pattern) };
  const min = typeof schema.minLength === "number" ? schema.minLength : 0;
  const max = typeof schema.maxLength === "number" ? schema.maxLength : null;
  return min === 0 && max === null ? { kind: "any" } : { kind: "length", min, max };
}
