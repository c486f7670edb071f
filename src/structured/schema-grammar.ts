/**
 * A JSON Schema as a grammar (xgrammar's EBNF) whose language is the compact JSON of the
 * schema's instances, or, where a keyword's exact language is out of a grammar's reach, a subset
 * of it that is never wrong (the finished value is validated for what remains: `validate.ts`).
 * Objects list every declared property in order, which any instance may do.
 */
import { jsonRules, literal, repeatGrammar, type RuleSink } from "./ebnf.js";
import { enumeratedMultiples, integerRange, numberRange, remainderRules, type NumberBounds } from "./numbers.js";
import { patternGrammar } from "./pattern-grammar.js";
import {
  PatternError,
  patternSamplerWithin,
  tableCellsPerSchema,
  type RegexBranch,
  type TableBudget,
} from "./regex.js";
import { checkSchema, unwritable } from "./check.js";
import { checkFinite } from "./finite.js";
import {
  arrayParts,
  effective,
  isObject,
  longestWritten,
  numberKeyword,
  onlyAnnotations,
  resolveReference,
  typesOf,
  UnsupportedSchemaError,
  type JsonSchema,
  type SchemaObject,
} from "./schema.js";
import { stringSource } from "./strings.js";

export interface GrammarOptions {
  /**
   * Allow one space after each `,` and `:`, as Python's `json.dumps` writes JSON: the official
   * chat templates show models their tool calls that way. Compact JSON is allowed too.
   */
  pythonSpacing?: boolean;
}

/** Spelled-out repetitions a grammar may hold in all: bounds past it are refused, so work stays linear. */
const repetitionBudget = 20_000;

export class GrammarBuilder implements RuleSink {
  readonly #rules = new Map<string, string>();
  readonly #bodies = new Map<string, string>();
  readonly #references = new Map<string, string>();
  #counter = 0;
  #spent = 0;
  /** The cells that length checks beside patterns may tabulate, in all. */
  readonly #tables: TableBudget = { cells: tableCellsPerSchema };
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
    const base = name.replace(/[^A-Za-z0-9_]/g, "_");
    let unique = base;
    while (this.#rules.has(unique)) unique = `${base}_${++this.#counter}`;
    this.#rules.set(unique, body);
    return unique;
  }

  define(name: string, body: string): void {
    this.#rules.set(name, body);
  }

  /** A rule for `body`, the same one for the same body. */
  shared(name: string, body: string): string {
    const known = this.#bodies.get(body);
    if (known) return known;
    const created = this.rule(name, body);
    this.#bodies.set(body, created);
    return created;
  }

  spend(units: number): void {
    this.#spent += units;
    if (this.#spent > repetitionBudget)
      throw new UnsupportedSchemaError(
        `the schema's bounds and patterns spell out more than ${repetitionBudget} repetitions in all; lower the largest 'maxLength', 'maxItems' or pattern quantifier`,
        "",
      );
  }

  /**
   * An expression matching the compact JSON of the instances we generate for `schema`, which is
   * at `pointer` in the schema (named in a refusal). A rewritten schema (`allOf`, `$ref` beside
   * other keywords, `nullable`) keeps the place of the schema that holds it; `oneOf`'s branches
   * are named as such.
   */
  schema(input: JsonSchema, root: JsonSchema, name: string, pointer = "", branches = "anyOf"): string {
    if (input === true || (isObject(input) && onlyAnnotations(input))) return "json_value";
    if (!isObject(input)) throw new UnsupportedSchemaError("a schema must be an object", pointer);
    const schema = effective(input, pointer);
    if (schema !== input)
      return this.schema(schema, root, name, pointer, "oneOf" in input && !("anyOf" in input) ? "oneOf" : branches);
    if (typeof schema.$ref === "string") return this.#reference(schema.$ref, root);
    if (schema.const !== undefined) return literal(JSON.stringify(schema.const));
    if (Array.isArray(schema.enum))
      return `(${schema.enum.map((value) => literal(JSON.stringify(value))).join(" | ")})`;
    if (Array.isArray(schema.anyOf)) {
      const written = schema.anyOf.flatMap((child, index) => (unwritable(child, root) ? [] : [{ child, index }]));
      const expressions = written.map(({ child, index }, position) =>
        this.named(child as JsonSchema, root, `${name}_any${position}`, `${pointer}/${branches}/${index}`),
      );
      return `(${expressions.join(" | ")})`;
    }
    const listed = typesOf(schema);
    if (listed.length === 0) return "json_value";
    return `(${listed.map((type) => this.#typed(type, schema, root, name, pointer)).join(" | ")})`;
  }

  #reference(reference: string, root: JsonSchema): string {
    const known = this.#references.get(reference);
    if (known) return known;
    const ruleName = this.rule(`ref_${reference.split("/").pop() ?? "definition"}`, "json_value");
    this.#references.set(reference, ruleName);
    // The definition's place: `#/$defs/name` is `/$defs/name`.
    const target = resolveReference(root, reference, "");
    this.#rules.set(ruleName, this.schema(target, root, ruleName, reference.slice(1)));
    return ruleName;
  }

  /** A rule name (or a simple expression) for `schema`, at `pointer`. */
  named(schema: JsonSchema, root: JsonSchema, name: string, pointer = ""): string {
    const expression = this.schema(schema, root, name, pointer);
    return /^[A-Za-z_][A-Za-z0-9_]*$/.test(expression) ? expression : this.rule(name, expression);
  }

  #typed(type: string, schema: SchemaObject, root: JsonSchema, name: string, pointer: string): string {
    switch (type) {
      case "string":
        return this.string(schema, pointer);
      case "number":
        return this.#number(schema, false, pointer);
      case "integer":
        return this.#number(schema, true, pointer);
      case "boolean":
        return '("true" | "false")';
      case "null":
        return '"null"';
      case "array":
        return this.#array(schema, root, name, pointer);
      default:
        return this.#object(schema, root, name, pointer);
    }
  }

  /** A JSON string: its format's or pattern's strings, or any text within its length bounds. */
  string(schema: SchemaObject, pointer: string): string {
    const source = stringSource(schema);
    if (source.kind === "any") return "json_string";
    const quote = '"\\""';
    if (source.kind === "pattern") {
      this.#checkLengths(schema, source.branches, pointer);
      return `(${quote} ${this.#pattern(schema, source.branches, pointer)} ${quote})`;
    }
    const max = Math.min(source.max ?? Infinity, longestWritten.characters);
    const body = repeatGrammar("json_character", source.min, max === Infinity ? null : max, this, "json_character");
    return `(${quote} ${body === '""' ? "" : body} ${quote})`;
  }

  /** A pattern's grammar; one too complex to make deterministic is refused, naming where it is. */
  #pattern(schema: SchemaObject, branches: RegexBranch[], pointer: string): string {
    try {
      return patternGrammar(branches, this, "json_character");
    } catch (error) {
      if (!(error instanceof PatternError)) throw error;
      const place = typeof schema.pattern === "string" ? "pattern" : "format";
      throw new UnsupportedSchemaError(`'${place}' has ${error.message}`, `${pointer}/${place}`);
    }
  }

  /**
   * Beside a pattern (or a format), lengths are validated once a reply is whole: a pattern with no
   * string of those lengths is refused now, where its table fits the budget.
   */
  #checkLengths(schema: SchemaObject, branches: RegexBranch[], pointer: string): void {
    const min = numberKeyword(schema, "minLength");
    const max = numberKeyword(schema, "maxLength");
    if (min === undefined && max === undefined) return;
    if (patternSamplerWithin(branches, min ?? 0, max ?? Infinity, this.#tables) !== null) return;
    const what = typeof schema.pattern === "string" ? "'pattern'" : `the format ${JSON.stringify(schema.format)}`;
    const lengths = max === undefined ? `${min} or more` : `${min ?? 0} to ${max}`;
    throw new UnsupportedSchemaError(
      `${what} matches no string of ${lengths} characters ('minLength', 'maxLength'); no value satisfies both`,
      `${pointer}/${typeof schema.pattern === "string" ? "pattern" : "format"}`,
    );
  }

  #number(schema: SchemaObject, integer: boolean, pointer: string): string {
    const bounds = numberBounds(schema, integer);
    const whole = integer || bounds.fractionDigits === 0;
    const unbounded = bounds.minimum === undefined && bounds.maximum === undefined;
    const step = numberKeyword(schema, "multipleOf");
    const multiples = step === undefined || step === 1 ? undefined : this.#multiples(bounds, step, whole);
    const expression =
      multiples !== undefined
        ? multiples
        : whole
          ? unbounded
            ? "json_integer"
            : integerRange(...integerBounds(bounds))
          : numberRange(bounds);
    if (expression === null)
      throw new UnsupportedSchemaError(
        `no ${integer ? "integer" : "number"} satisfies the schema's bounds`,
        `${pointer}/minimum`,
      );
    return expression === "json_integer" || expression === "json_number" ? expression : `(${expression})`;
  }

  /**
   * `multipleOf` exactly where a grammar can: the multiples written out between near bounds, or
   * for whole steps up to 100 with no bound but zero below, the automaton of remainders.
   * Undefined where it cannot (the value is then validated once finished).
   */
  #multiples(bounds: NumberBounds, step: number, whole: boolean): string | null | undefined {
    const listed = enumeratedMultiples(bounds, step, whole);
    if (listed !== undefined) return listed;
    const naturalOnly = bounds.minimum === 0 && !bounds.minimumExclusive && bounds.maximum === undefined;
    const open = bounds.minimum === undefined && bounds.maximum === undefined;
    if (!whole || !Number.isInteger(step) || step > 100 || !(naturalOnly || open)) return undefined;
    const name = (remainder: number) => `multiple_${step}_${remainder}`;
    if (!this.#rules.has(name(0))) {
      const { bodies } = remainderRules(step, name);
      bodies.forEach((body, remainder) => this.#rules.set(name(remainder), body));
    }
    const { start } = remainderRules(step, name);
    return naturalOnly ? start : `("-"? ${start})`;
  }

  #array(schema: SchemaObject, root: JsonSchema, name: string, pointer: string): string {
    const { prefix, rest } = arrayParts(schema);
    const min = numberKeyword(schema, "minItems") ?? 0;
    const max = Math.min(numberKeyword(schema, "maxItems") ?? Infinity, longestWritten.items);
    const [prefixAt, restAt] = Array.isArray(schema.items) ? ["items", "additionalItems"] : ["prefixItems", "items"];
    const written = prefix
      .slice(0, max)
      .map((child, index) =>
        this.named(child as JsonSchema, root, `${name}_item${index}`, `${pointer}/${prefixAt}/${index}`),
      );
    const left = max - written.length;
    const extraMin = Math.max(0, min - written.length);
    const item =
      rest === false || left === 0
        ? null
        : this.named(rest as JsonSchema, root, `${name}_item`, `${pointer}/${restAt}`);
    return this.list('"["', written, item, extraMin, left === Infinity ? null : left, '"]"');
  }

  #object(schema: SchemaObject, root: JsonSchema, name: string, pointer: string): string {
    const declared = isObject(schema.properties) ? Object.entries(schema.properties) : [];
    const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
    const maxProperties = numberKeyword(schema, "maxProperties") ?? Infinity;
    // Every declared property is written, in order; past `maxProperties`, the optional ones go first.
    let optionalRoom = maxProperties - required.size;
    const written = declared.filter(([property]) => required.has(property) || optionalRoom-- > 0);
    const members = written.map(
      ([property, child]) =>
        `${literal(JSON.stringify(property))} ${this.colon} ${this.named(child as JsonSchema, root, `${name}_${property}`, `${pointer}/properties/${property}`)}`,
    );
    const additional = schema.additionalProperties;
    const openEnded = declared.length === 0 && additional !== false;
    const valueSchema = isObject(additional) ? additional : openEnded ? true : null;
    const minimum = Math.max(0, (numberKeyword(schema, "minProperties") ?? 0) - members.length);
    if (valueSchema === null && minimum > 0)
      throw new UnsupportedSchemaError(
        "'minProperties' asks for more properties than the object may hold",
        `${pointer}/minProperties`,
      );
    if (valueSchema === null) return this.list('"{"', members, null, 0, 0, '"}"');
    const names = schema.propertyNames;
    // Names are strings whatever else their schema says (an empty one, an enum of names).
    const named = isObject(names)
      ? this.schema({ type: "string", ...names }, root, `${name}_name`, `${pointer}/propertyNames`)
      : "json_string";
    const key = named === "json_value" ? "json_string" : named;
    const value = this.named(valueSchema, root, `${name}_value`, `${pointer}/additionalProperties`);
    const pair = this.shared(`${name}_pair`, `${key} ${this.colon} ${value}`);
    const maximum = Math.min(maxProperties - members.length, longestWritten.items);
    return this.list('"{"', members, pair, minimum, maximum === Infinity ? null : maximum, '"}"');
  }

  /** `open first… (element){min,max} close`, comma-separated. */
  list(open: string, first: string[], element: string | null, min: number, max: number | null, close: string): string {
    const parts = [open, first.join(` ${this.comma} `)].filter(Boolean);
    if (element !== null && max !== 0) {
      const separated = this.shared("separated", `${this.comma} ${element}`);
      if (first.length > 0) parts.push(repeatGrammar(separated, min, max, this, "separated"));
      else {
        const rest = repeatGrammar(separated, Math.max(0, min - 1), max === null ? null : max - 1, this, "separated");
        const tail = rest === '""' ? "" : ` ${rest}`;
        parts.push(min > 0 ? `${element}${tail}` : `(${element}${tail})?`);
      }
    }
    parts.push(close);
    return `(${parts.join(" ")})`;
  }

  /** The whole grammar, with `root ::= rootExpression` first. */
  build(rootExpression: string): string {
    return [`root ::= ${rootExpression}`, ...[...this.#rules].map(([name, body]) => `${name} ::= ${body}`)].join("\n");
  }
}

/** The bounds a number schema sets, the tighter of `minimum` and `exclusiveMinimum` (and of the maxima). */
export function numberBounds(schema: SchemaObject, integer: boolean): NumberBounds {
  const minimum = numberKeyword(schema, "minimum");
  const exclusiveMinimum = numberKeyword(schema, "exclusiveMinimum");
  const maximum = numberKeyword(schema, "maximum");
  const exclusiveMaximum = numberKeyword(schema, "exclusiveMaximum");
  const lowExclusive = exclusiveMinimum !== undefined && (minimum === undefined || exclusiveMinimum >= minimum);
  const highExclusive = exclusiveMaximum !== undefined && (maximum === undefined || exclusiveMaximum <= maximum);
  const multiple = numberKeyword(schema, "multipleOf");
  const fractionDigits = integer ? 0 : decimalPlaces(multiple);
  return {
    ...(lowExclusive ? { minimum: exclusiveMinimum } : minimum !== undefined ? { minimum } : {}),
    minimumExclusive: lowExclusive,
    ...(highExclusive ? { maximum: exclusiveMaximum } : maximum !== undefined ? { maximum } : {}),
    maximumExclusive: highExclusive,
    ...(fractionDigits !== undefined ? { fractionDigits } : {}),
  };
}

/** `multipleOf` 1, 0.1, 0.01…: the fraction digits its multiples have; undefined for any other step. */
function decimalPlaces(multiple: number | undefined): number | undefined {
  if (multiple === undefined) return undefined;
  for (let places = 0; places <= 12; places++) if (multiple === Number(`1e-${places}`)) return places;
  return undefined;
}

/** The least and greatest integers within the bounds, counted in BigInt: `minimum + 1` in floats can be `minimum`. */
function integerBounds(bounds: NumberBounds): [bigint | null, bigint | null] {
  const { minimum, maximum } = bounds;
  const low =
    minimum === undefined
      ? null
      : Number.isInteger(minimum) && bounds.minimumExclusive
        ? BigInt(minimum) + 1n
        : BigInt(Math.ceil(minimum));
  const high =
    maximum === undefined
      ? null
      : Number.isInteger(maximum) && bounds.maximumExclusive
        ? BigInt(maximum) - 1n
        : BigInt(Math.floor(maximum));
  return [low, high];
}

/** The grammar of a schema already checked (`checkSchema`, `checkFinite`): its compact JSON instances. */
export function grammarFor(schema: JsonSchema): string {
  const builder = new GrammarBuilder();
  return builder.build(builder.schema(schema, schema, "value"));
}

/** A grammar whose language is compact JSON instances of `schema` (checked first). */
export function schemaToGrammar(schema: JsonSchema): string {
  checkSchema(schema);
  checkFinite(schema);
  return grammarFor(schema);
}
