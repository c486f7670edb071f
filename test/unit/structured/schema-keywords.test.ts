/**
 * Structured outputs as apps write them: every keyword, alone and in the schemas pydantic, zod
 * and openai-node generate (test/fixtures/schemas/). Each grammar accepts what the schema allows
 * (our samples, checked by ajv with ajv-formats) and never what it refuses (random strings, checked
 * by the same validator); over HTTP, the reply parses, validates and round-trips through zod.
 */
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { checkSchema } from "../../../src/structured/check.js";
import { integerRange, numberRange } from "../../../src/structured/numbers.js";
import { sampleSchema } from "../../../src/structured/sample.js";
import { UnsupportedSchemaError, type JsonSchema } from "../../../src/structured/schema.js";
import { schemaToGrammar } from "../../../src/structured/schema-grammar.js";
import { validate } from "../../../src/structured/validate.js";
import { patternMatches } from "../../../src/structured/strings.js";
import { chatCompletionSchema } from "../../../src/core/wire/chat-completion.js";
import { accepts, parseGrammar } from "../../support/ebnf.js";
import { makeApp } from "../../support/unit-app.js";
// @ts-expect-error -- a plain ES module that generates the zod fixtures; its models are reused here
import { models as zodModels } from "../../fixtures/schemas/zod-models.mjs";
import { zodResponseFormat } from "openai/helpers/zod";

const ajv = new Ajv2020({ strict: false, allErrors: false });
addFormats.default(ajv);

function seeded(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 16_807) % 2_147_483_647) / 2_147_483_647;
}

const fixtures = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../fixtures/schemas/${name}`, import.meta.url), "utf8")) as Record<
    string,
    JsonSchema
  >;

/** ajv reads `$schema` as a meta-schema to load; the schemas are the same without it. */
function forAjv(schema: JsonSchema): object {
  if (typeof schema === "boolean") return { not: schema ? {} : { not: {} } };
  const { $schema: _, ...rest } = schema;
  return rest;
}

/** One schema per keyword we claim, alone or in the combination generators write. */
const keywords = fixtures("keywords.json");

function checkAgainstValidators(name: string, schema: JsonSchema, seeds = 6): void {
  const grammar = schemaToGrammar(schema);
  const ajvValidate = ajv.compile(forAjv(schema));
  for (let seed = 1; seed <= seeds; seed++) {
    const instance = sampleSchema(schema, seeded(seed * 7919 + name.length));
    const text = JSON.stringify(instance);
    expect({ name, text, ajv: ajvValidate(instance), ours: validate(schema, instance) }).toEqual({
      name,
      text,
      ajv: true,
      ours: null,
    });
    expect({ name, text, accepted: accepts(grammar, text) }).toEqual({ name, text, accepted: true });
  }
}

describe("every keyword, enforced by the grammar", () => {
  it("samples satisfy ajv, and the grammar accepts them", () => {
    for (const [name, schema] of Object.entries(keywords)) checkAgainstValidators(name, schema);
  });

  it("what the grammar accepts, ajv accepts: random strings near each keyword's language", () => {
    const probes: Record<string, string[]> = {
      pattern: ['"ABC-1234"', '"abc-1234"', '"ABC-123"', '"ABCD-1234"', '"AB-12345"'],
      unanchoredPattern: ['"xxabbbcyy"', '"ac"', '"abc"', '"ab"'],
      patternAlternation: ['"cats"', '"dog"', '"123"', '"1234"', '"cow"', '"dogss"'],
      dateTime: [
        '"2024-02-29T10:00:00Z"',
        '"2024-13-01T10:00:00Z"',
        '"2024-04-31T10:00:00Z"',
        '"2024-01-01T24:00:00Z"',
        '"2024-01-01T10:00:00.5Z"',
      ],
      date: ['"2023-02-28"', '"2023-02-30"', '"2023-1-01"'],
      email: ['"a.b@mail.example.org"', '"a..b@x.org"', '"@x.org"', '"a@b"'],
      ipv4: ['"10.0.0.1"', '"256.1.1.1"', '"01.2.3.4"', '"1.2.3"'],
      uuid: ['"123e4567-e89b-42d3-a456-426614174000"', '"123e4567-e89b-12d3-a456-42661417400"'],
      lengths: ['"a"', '"ab"', '"abcde"', '"abcdef"', '"é\\"x"'],
      integerRange: ["-16", "-15", "0", "7", "120", "121", "1000", "-0", "05"],
      integerExclusive: ["0", "1", "9", "10"],
      numberRange: ["-40.5", "-40.51", "-40.49", "50.25", "50.26", "50.2", "0", "-0.5", "12.75"],
      numberOpenUnit: ["0", "0.0", "0.5", "1", "0.999", "1.0", "0.000"],
      numberCents: ["1.25", "1.255", "0", "-1.25", "3.1"],
      items: ["[]", '["a"]', '["a","b","c"]', '["a","b","c","d"]'],
      tuple: ['[1,"a"]', '["a",1]', "[1]", '[1,"a",2]'],
      dictionary: ['{"a":1,"b":2}', "{}", '{"a":-1}', '{"a":"x"}'],
      propertyNames: ['{"ab":true}', "{}", '{"Ab":true}', '{"ab":true,"cd":false,"ef":true,"gh":false}'],
      propertyNamesEnum: ['{"north":1}', '{"west":1}', "{}", '{"south":10}'],
    };
    for (const [name, texts] of Object.entries(probes)) {
      const schema = keywords[name]!;
      const grammar = schemaToGrammar(schema);
      const ajvValidate = ajv.compile(forAjv(schema));
      for (const text of texts) {
        if (accepts(grammar, text))
          expect({ name, text, valid: ajvValidate(JSON.parse(text)) }).toEqual({ name, text, valid: true });
      }
      // Each probe list holds at least one value the grammar must accept.
      expect({ name, some: texts.some((text) => accepts(grammar, text)) }).toEqual({ name, some: true });
    }
  });

  it("multipleOf is exact: multiples written out between near bounds, and the remainder automaton without bounds", () => {
    const halves = schemaToGrammar(keywords.numberHalves!);
    for (const [text, expected] of [
      ["4.5", true],
      ["0", true],
      ["5", true],
      ["4.25", false],
      ["5.5", false],
      ["-0.5", false],
    ] as const)
      expect({ text, accepted: accepts(halves, text) }).toEqual({ text, accepted: expected });
    const sevens = schemaToGrammar(keywords.integerMultipleOpen!);
    const threes = schemaToGrammar(keywords.naturalMultiple!);
    for (let value = -60; value <= 250; value++) {
      expect({ value, accepted: accepts(sevens, String(value)) }).toEqual({ value, accepted: value % 7 === 0 });
      expect({ value, accepted: accepts(threes, String(value)) }).toEqual({
        value,
        accepted: value >= 0 && value % 3 === 0,
      });
    }
    expect(accepts(sevens, "007")).toBe(false);
  });

  it("integer ranges are exact, and decimal ranges never admit a value out of bounds", () => {
    const random = seeded(99);
    for (let round = 0; round < 60; round++) {
      const low = Math.floor(random() * 400) - 200;
      const high = low + Math.floor(random() * 300);
      const grammar = `root ::= ${integerRange(BigInt(low), BigInt(high))}`;
      for (let value = low - 5; value <= high + 5; value += 1 + Math.floor(random() * 7))
        expect({ low, high, value, accepted: accepts(grammar, String(value)) }).toEqual({
          low,
          high,
          value,
          accepted: value >= low && value <= high,
        });
      const decimalLow = Math.round((random() * 40 - 20) * 100) / 100;
      const decimalHigh = Math.round((decimalLow + random() * 10) * 100) / 100;
      const lowExclusive = random() < 0.5;
      const highExclusive = random() < 0.5;
      const expression = numberRange({
        minimum: decimalLow,
        minimumExclusive: lowExclusive,
        maximum: decimalHigh,
        maximumExclusive: highExclusive,
      });
      const numberGrammar = `root ::= ${expression}\njson_number ::= "0"`;
      let acceptedAny = false;
      for (let tries = 0; tries < 120; tries++) {
        const value = Math.round((decimalLow - 2 + random() * (decimalHigh - decimalLow + 4)) * 1000) / 1000;
        const inside =
          (lowExclusive ? value > decimalLow : value >= decimalLow) &&
          (highExclusive ? value < decimalHigh : value <= decimalHigh);
        const accepted = accepts(numberGrammar, String(value));
        acceptedAny ||= accepted;
        if (accepted)
          expect({ decimalLow, decimalHigh, lowExclusive, highExclusive, value, inside }).toMatchObject({
            inside: true,
          });
        // Inside the bounds, the grammar misses only values it could write some other way (never a whole unit's).
        if (inside && value !== decimalLow && value !== decimalHigh)
          expect({ decimalLow, decimalHigh, value, accepted }).toMatchObject({ accepted: true });
      }
      expect(acceptedAny).toBe(true);
    }
  });

  it("integer bounds at the edge of exact JSON numbers hold to the unit, in the grammar and in samples", () => {
    const edge = Number.MAX_SAFE_INTEGER;
    const schemas: JsonSchema[] = [
      { type: "integer", exclusiveMinimum: edge - 1 },
      { type: "integer", exclusiveMaximum: -edge + 1 },
      { type: "integer", minimum: edge - 3, exclusiveMaximum: edge },
    ];
    for (const schema of schemas) checkAgainstValidators(JSON.stringify(schema), schema);
    const grammar = schemaToGrammar({ type: "integer", exclusiveMinimum: edge - 1 });
    expect([accepts(grammar, String(edge)), accepts(grammar, String(edge - 1))]).toEqual([true, false]);
  });

  it("a pattern beside length bounds is sampled at those lengths: valid to ajv every time", () => {
    // Sampled freely and checked after, such strings missed their bounds: the first two in 50 of 50 samples.
    const bounded: Record<string, JsonSchema> = {
      "letters, at least 50": { type: "string", pattern: "^[a-z]+$", minLength: 50 },
      "letters or none, 5 to 6": { type: "string", pattern: "^[a-z]*$", minLength: 5, maxLength: 6 },
      "a letter anywhere, 5 to 6": { type: "string", pattern: "[a-z]", minLength: 5, maxLength: 6 },
      "pairs, at least 3": { type: "string", pattern: "^(ab)+$", minLength: 3 },
      "a phone number or x's, 10 to 12": {
        type: "string",
        pattern: "^\\d{3}-\\d{4}$|^x+$",
        minLength: 10,
        maxLength: 12,
      },
      "an email, at least 40": { type: "string", format: "email", minLength: 40 },
    };
    for (const [name, schema] of Object.entries(bounded)) checkAgainstValidators(name, schema, 20);
  });
});

type GrammarNode = ReturnType<typeof parseGrammar> extends Map<string, infer Node> ? Node : never;

/** A rule's alternatives: its choice's options (an accepting state's is optional: `(…)?`). */
function alternatives(node: GrammarNode): GrammarNode[] {
  if (node.type === "repeat" && node.max === 1) return alternatives(node.item);
  return node.type === "choice" ? node.options : [node];
}

/** The characters an expression can begin with: code-point ranges, and escape literals whole. */
function firstCharacters(
  node: GrammarNode,
  rules: Map<string, GrammarNode>,
): { ranges: number[][]; literals: string[] } {
  switch (node.type) {
    case "sequence":
      return firstCharacters(node.items[0]!, rules);
    case "reference":
      return firstCharacters(rules.get(node.name)!, rules);
    case "choice": {
      const each = node.options.map((option) => firstCharacters(option, rules));
      return { ranges: each.flatMap((one) => one.ranges), literals: each.flatMap((one) => one.literals) };
    }
    case "class": {
      if (!node.negate) return { ranges: node.ranges, literals: [] };
      let next = 0;
      const ranges: number[][] = [];
      for (const [low, high] of [...node.ranges].sort((a, b) => a[0] - b[0])) {
        if (low > next) ranges.push([next, low - 1]);
        next = Math.max(next, high + 1);
      }
      return { ranges: [...ranges, [next, 0x10ffff]], literals: [] };
    }
    case "literal":
      return { ranges: [], literals: [node.text] };
    default:
      return firstCharacters(node.item, rules);
  }
}

function overlaps(a: { ranges: number[][]; literals: string[] }, b: typeof a): boolean {
  const inRanges = (ranges: number[][], text: string) =>
    ranges.some(([low, high]) => text.codePointAt(0)! >= low! && text.codePointAt(0)! <= high!);
  return (
    a.ranges.some(([low, high]) =>
      b.ranges.some(([otherLow, otherHigh]) => low! <= otherHigh! && otherLow! <= high!),
    ) ||
    a.literals.some((literal) => b.literals.includes(literal) || inRanges(b.ranges, literal)) ||
    b.literals.some((literal) => inRanges(a.ranges, literal))
  );
}

/** Each schema refused by `work`: an UnsupportedSchemaError whose message matches, naming the place. */
function expectRefusals(work: (schema: JsonSchema) => unknown, cases: [JsonSchema, RegExp, string][]): void {
  for (const [schema, message, pointer] of cases) {
    let caught: unknown;
    try {
      work(schema);
    } catch (error) {
      caught = error;
    }
    expect({ schema, error: caught }).toMatchObject({ error: expect.any(UnsupportedSchemaError) });
    expect({
      schema,
      message: (caught as Error).message,
      pointer: (caught as UnsupportedSchemaError).pointer,
    }).toMatchObject({ message: expect.stringMatching(message), pointer });
  }
}

describe("refusals name the keyword and where it is", () => {
  it("refuses what a grammar cannot enforce", () => {
    const cases: [JsonSchema, RegExp, string][] = [
      [{ type: "string", pattern: "^(?=a)b" }, /lookahead/, "/pattern"],
      [{ type: "string", pattern: "(?<!a)b" }, /lookbehind/, "/pattern"],
      [{ anyOf: [{ type: "string", pattern: "^(?!a)" }, { pattern: "(?=b)" }] }, /lookahead/, "/anyOf/0/pattern"],
      [{ type: "string", pattern: "(a)\\1" }, /backreference/, "/pattern"],
      [{ type: "string", pattern: "\\bword" }, /word boundary/, "/pattern"],
      [{ type: "string", pattern: "\\p{L}+" }, /Unicode property/, "/pattern"],
      [{ type: "string", pattern: "a{1,5000}" }, /repetition bound/, "/pattern"],
      [{ type: "string", pattern: "a(b" }, /not a valid regular expression/, "/pattern"],
      [{ type: "string", format: "color" }, /format "color"/, "/format"],
      [{ oneOf: [{ type: "string" }, { type: "string", maxLength: 2 }] }, /can match the same value/, "/oneOf"],
      [{ allOf: [{ type: "string" }, { maxLength: 2 }] }, /more than one constraining/, "/allOf/1"],
      [{ not: {} }, /'not'/, "/not"],
      [{ type: "object", patternProperties: {} }, /'patternProperties'/, "/patternProperties"],
      [{ type: "object", propertyNames: { type: "integer" } }, /propertyNames/, "/propertyNames"],
      [{ type: "integer", minimum: "3" }, /'minimum' must be a number/, "/minimum"],
      [{ type: "number", exclusiveMinimum: true }, /'exclusiveMinimum' must be a number/, "/exclusiveMinimum"],
      [{ type: "array", minItems: -1 }, /'minItems'/, "/minItems"],
      // Bounds no value meets, where they are: a 400 before any reply is written and refused.
      [
        { type: "object", properties: { v: { type: "string", minLength: 5, maxLength: 3 } } },
        /'minLength' 5 is above 'maxLength' 3: no string satisfies both/,
        "/properties/v/minLength",
      ],
      [{ type: "array", items: { type: "array", minItems: 3, maxItems: 1 } }, /no list satisfies/, "/items/minItems"],
      [{ anyOf: [{ type: "object", minProperties: 3, maxProperties: 1 }] }, /no object/, "/anyOf/0/minProperties"],
      [
        { type: "object", properties: { a: {}, b: {} }, required: ["a", "b"], maxProperties: 1 },
        /'required' names 2 properties, more than 'maxProperties' 1/,
        "/required",
      ],
      [
        { $defs: { long: { type: "string", minLength: 2000 } }, $ref: "#/$defs/long" },
        /over 1000/,
        "/$defs/long/minLength",
      ],
      [{ type: "object", properties: { v: { type: "array", minItems: 300 } } }, /over 256/, "/properties/v/minItems"],
      [{ type: "array", prefixItems: [{}], items: false, minItems: 2 }, /more items than/, "/minItems"],
      [
        { type: "string", enum: ["a", 1] },
        /'enum' value 1 breaks the schema's own keywords: it must be of type string/,
        "/enum/1",
      ],
      [{ type: "string", const: "abc", maxLength: 2 }, /'const' breaks .* at most 2 characters/, "/const"],
      [{ type: "integer", enum: [1, 2.5] }, /'enum' value 1 breaks .* type integer/, "/enum/1"],
      // Past 2^53 a JSON number is not exact: 1e20 + 1 reads as 1e20, so such a bound cannot be held.
      [
        { type: "integer", exclusiveMinimum: 1e20 },
        /'exclusiveMinimum' 100000000000000000000 is past 2\^53/,
        "/exclusiveMinimum",
      ],
      [{ type: ["integer", "null"], maximum: -1e17 }, /'maximum' -100000000000000000 is past 2\^53/, "/maximum"],
    ];
    expectRefusals(checkSchema, cases);
  });

  it("a grammar's refusal names the place of the schema it refuses", () => {
    const cases: [JsonSchema, RegExp, string][] = [
      [
        { type: "object", properties: { v: { type: "integer", minimum: 0.5, maximum: 0.6 } } },
        /no integer satisfies/,
        "/properties/v/minimum",
      ],
      [{ oneOf: [{ type: "number", minimum: 5, maximum: 3 }, { type: "string" }] }, /no number/, "/oneOf/0/minimum"],
      [
        { type: "array", prefixItems: [{ type: "integer", multipleOf: 7, minimum: 1, maximum: 6 }] },
        /no integer/,
        "/prefixItems/0/minimum",
      ],
      [
        { type: "object", properties: { v: { type: "object", properties: { a: {} }, minProperties: 2 } } },
        /more properties than the object may hold/,
        "/properties/v/minProperties",
      ],
      [
        { $defs: { odd: { type: "integer", exclusiveMinimum: 3, exclusiveMaximum: 4 } }, $ref: "#/$defs/odd" },
        /no integer/,
        "/$defs/odd/minimum",
      ],
      [
        { type: "object", properties: { v: { type: "string", pattern: "^a$", minLength: 3 } } },
        /'pattern' matches no string of 3 or more characters/,
        "/properties/v/pattern",
      ],
      [
        { type: "string", format: "date", minLength: 11 },
        /the format "date" matches no string of 11 or more/,
        "/format",
      ],
      [{ type: "string", pattern: "a", maxLength: 0 }, /matches no string of 0 to 0 characters/, "/pattern"],
    ];
    expectRefusals(schemaToGrammar, cases);
    // A listed null beside `nullable`, a whole number listed as an integer: no refusal.
    expect(() => checkSchema({ type: "string", nullable: true, enum: ["a", null] })).not.toThrow();
    expect(() => checkSchema({ type: "integer", enum: [1, 2.0] })).not.toThrow();
  });

  it("a sample checks each anyOf's branches once, however many items visit it", () => {
    // Checking a branch reads its whole enum, so checking it once per item would multiply the two.
    const values = Array.from({ length: 16_000 }, (_, index) => `v${index}`);
    const items = { anyOf: [{ type: "string", enum: values }, { type: "null" }] };
    const schema: JsonSchema = { type: "array", minItems: 256, maxItems: 256, items };
    const started = performance.now();
    const sample = sampleSchema(schema, seeded(7));
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(validate(schema, sample)).toBeNull();
  });

  it("hostile bounds are refused before the work grows: every schema below is answered within a second", () => {
    const many = (count: number, schema: JsonSchema) => ({
      type: "object",
      properties: Object.fromEntries(Array.from({ length: count }, (_, index) => [`p${index}`, schema])),
    });
    // Each is refused (with the reason) or compiled, in well under a second either way.
    const hostile: [JsonSchema, RegExp | "compiled"][] = [
      // Compact as grammars, but a million automaton states to check a value against, and to sample.
      [{ type: "string", pattern: "(a{1000}){1000}" }, /spell out 1000000 characters/],
      [{ type: "string", pattern: `^${"(a|b)?".repeat(5000)}$` }, /spell out 10000 characters/],
      [{ type: "string", pattern: `^${"(a|b)?".repeat(500)}$` }, "compiled"],
      [many(200, { type: "string", maxLength: 1000 }), /more than 20000 repetitions/],
      [many(200, { type: "string", pattern: "^[a-z]{1,900}$" }), /more than 20000 repetitions/],
      [{ type: "integer", minimum: 1e300 }, /no integer/],
    ];
    for (const [schema, expected] of hostile) {
      const started = performance.now();
      let outcome = "compiled";
      try {
        schemaToGrammar(schema);
      } catch (error) {
        outcome = (error as Error).message;
      }
      const elapsed = performance.now() - started;
      expect({ outcome, fast: elapsed < 1000 }).toMatchObject({
        outcome: expected === "compiled" ? "compiled" : expect.stringMatching(expected),
        fast: true,
      });
    }
  });

  it("recursion a grammar cannot write is refused: left recursion, and recursion with no way out", () => {
    const refused: [JsonSchema, RegExp][] = [
      [{ $defs: { a: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" }, /left recursion/],
      [
        {
          $defs: { a: { anyOf: [{ $ref: "#/$defs/b" }, { type: "null" }] }, b: { allOf: [{ $ref: "#/$defs/a" }] } },
          $ref: "#/$defs/a",
        },
        /left recursion/,
      ],
      [
        { $defs: { n: { type: "object", properties: { next: { $ref: "#/$defs/n" } } } }, $ref: "#/$defs/n" },
        /no finite value/,
      ],
      [
        {
          $defs: {
            n: {
              type: "object",
              properties: { kids: { type: "array", items: { $ref: "#/$defs/n" }, minItems: 1 } },
              required: ["kids"],
            },
          },
          $ref: "#/$defs/n",
        },
        /no finite value/,
      ],
    ];
    for (const [schema, message] of refused) expect(() => schemaToGrammar(schema)).toThrow(message);
    // The ways out pydantic writes: a nullable reference, and a list that may be empty.
    for (const schema of [
      {
        $defs: {
          n: {
            type: "object",
            properties: { next: { anyOf: [{ $ref: "#/$defs/n" }, { type: "null" }] } },
            required: ["next"],
          },
        },
        $ref: "#/$defs/n",
      },
      {
        $defs: { n: { type: "object", properties: { kids: { type: "array", items: { $ref: "#/$defs/n" } } } } },
        $ref: "#/$defs/n",
      },
    ])
      checkAgainstValidators("recursion with a way out", schema);
  });

  it("a pattern's grammar is deterministic: no two alternatives of a state begin with the same character", () => {
    const patterns = [
      "^(a?){8}((((((((a?){2}){2}){2}){2}){2}){2}){2}){2}a{100}$",
      "((a|a?)(a?|a)){16}b",
      '^[a-z"\\\\]+(\\n|x?)*$',
      "[0-9]{2,4}-?[0-9]*",
    ];
    for (const pattern of patterns) {
      const grammar = schemaToGrammar({ type: "string", pattern });
      const rules = parseGrammar(grammar);
      const states = [...rules].filter(([name]) => name.startsWith("pattern_state"));
      expect(states.length, pattern).toBeGreaterThan(0);
      for (const [name, body] of states) {
        const options = alternatives(body).map((option) => firstCharacters(option, rules));
        for (const [index, one] of options.entries())
          for (const other of options.slice(index + 1))
            expect({ pattern, name, overlap: overlaps(one, other) }).toEqual({ pattern, name, overlap: false });
      }
      // What it accepts is still the pattern's language (told by our automaton: a backtracking
      // engine takes minutes over the first pattern).
      for (const value of ["a".repeat(100), "a".repeat(364), "a".repeat(365), "b", 'b"\\\n', "12-34"])
        expect(accepts(grammar, JSON.stringify(value)), `${pattern} ${value.length}`).toBe(
          patternMatches(pattern, value),
        );
    }
  });

  it("a caller's pattern is matched in time linear in the value, never by a backtracking engine", () => {
    const value = `${"a".repeat(5000)}!`;
    for (const pattern of ["^(a+)+$", "^(a|a)*$", "(a*)*b", "^(\\w+\\s?)*$"]) {
      const started = performance.now();
      const violation = validate({ type: "string", pattern }, value);
      expect({ pattern, violation: violation?.message, fast: performance.now() - started < 1000 }).toEqual({
        pattern,
        violation: `must match the pattern ${JSON.stringify(pattern)}`,
        fast: true,
      });
    }
    expect(validate({ type: "string", pattern: "^(a+)+$" }, "aaaa")).toBeNull();
    // A format name that is also an object's own property name is only a name.
    expect(() => schemaToGrammar({ type: "string", format: "constructor", pattern: "^x$" })).not.toThrow();
    expect(() => checkSchema({ type: "string", format: "__proto__" })).toThrow(/format "__proto__" is not supported/);
  });

  it("a pattern with lookahead is taken beside a format, whose grammar writes the value", () => {
    const schema: JsonSchema = { type: "string", format: "email", pattern: "^(?!\\.)[^@]+@[^@]+$" };
    checkAgainstValidators("emailWithLookahead", schema);
  });
});

/**
 * Written by OpenAI's SDK helpers for strict mode (`.parse()`'s `to_strict_json_schema`,
 * `zodResponseFormat`, `zodFunction`), which the hosted API takes with `strict: true`; but not a
 * dict (`additionalProperties` a schema), which it refuses there.
 */
function strictlyWritten(name: string): boolean {
  return (
    /\((openai to_strict_json_schema|zodResponseFormat|zodFunction)\)$/.test(name) && !name.startsWith("WordCount")
  );
}

describe("the schemas generators write", () => {
  const corpus = { ...fixtures("pydantic.json"), ...fixtures("zod.json") };

  it("every pydantic, zod and openai-node schema is accepted, and its samples are valid and accepted by its grammar", () => {
    expect(Object.keys(corpus).length).toBeGreaterThanOrEqual(30);
    for (const [name, schema] of Object.entries(corpus)) checkAgainstValidators(name, schema, 4);
  });

  it("over HTTP on the deterministic engine: replies and tool arguments parse, validate, and round-trip through zod", async () => {
    const { app, post } = await makeApp({ rpm: 10_000, tpm: 100_000_000, creditUsd: 1000 });
    const messages = [{ role: "user", content: "Fill it in." }];
    for (const [name, schema] of Object.entries(corpus)) {
      // Sent as the SDKs send them: strict when OpenAI's own helpers wrote them for strict mode.
      const strict = strictlyWritten(name);
      const validator = ajv.compile(forAjv(schema));
      for (const seed of [1, 2, 3]) {
        const response = await app.handle(
          post("/v1/chat/completions", {
            model: "alpha3:8b-instruct-q8_0",
            messages,
            seed,
            temperature: 1,
            response_format: { type: "json_schema", json_schema: { name: "fixture", schema, strict } },
          }),
        );
        expect({ name, status: response.status }).toEqual({ name, status: 200 });
        const content = chatCompletionSchema.parse(await response.json()).choices[0]!.message.content!;
        expect({ name, content, valid: validator(JSON.parse(content)) }).toMatchObject({ valid: true });
        const zodName = /^(\w+) \(zodResponseFormat\)$/.exec(name)?.[1];
        if (zodName) {
          const format = zodResponseFormat((zodModels as Record<string, never>)[zodName]!, zodName);
          expect(() => format.$parseRaw(content)).not.toThrow();
        }
      }
      const called = await app.handle(
        post("/v1/chat/completions", {
          model: "gamma-7b-instruct-v0.3",
          messages,
          tools: [{ type: "function", function: { name: "record", parameters: schema, strict } }],
          tool_choice: "required",
        }),
      );
      expect({ name, status: called.status }).toEqual({ name, status: 200 });
      const call = chatCompletionSchema.parse(await called.json()).choices[0]!.message.tool_calls![0]!;
      expect({ name, valid: validator(JSON.parse(call.function.arguments)) }).toMatchObject({ valid: true });
    }
  }, 60_000);
});
