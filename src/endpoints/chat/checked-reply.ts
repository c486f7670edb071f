/**
 * The check of a finished structured reply. The grammar enforces most keywords whole; a few
 * (number bounds off whole units, `multipleOf`, `uniqueItems`, a pattern beside a format) only in
 * part, so every reply that stopped on its own is validated against its schema before its
 * `finish` goes out, and one that breaks it ends as an error, never as a success.
 */
import { InvalidOutputError } from "../../core/errors/api.js";
import type { JsonSchema } from "../../structured/schema.js";
import { validate, type Violation } from "../../structured/validate.js";
import { ToolCallParser } from "../../prompt/tool-calls.js";
import type { ToolSyntax } from "../../prompt/templates.js";
import type { ChoicePart, Generation } from "../../pipeline/generation.js";
import { maxNesting, nestsTooDeep } from "../../core/wire/nesting.js";
import type { ReplyRules } from "./structured.js";

/** A break, and what the client can do about it. */
interface Breach {
  violation: Violation;
  advice: string;
}

interface Finding extends Breach {
  param: string;
  subject: string;
}

const partialAdvice =
  "The grammar enforces this keyword only in part and the finished value is checked (see the keyword table in docs/structured-outputs.md); " +
  "retry the request, or state the rule in a form the grammar enforces whole.";
const depthAdvice =
  "A recursive schema lets a grammar nest without end; retry the request, or bound the recursion " +
  "(a 'maxItems', or its levels written out).";

/**
 * The first way `text` breaks `schema`, or null. The check recurses, so a value nested deeper than
 * any request may be is refused unread.
 */
function breachOf(schema: JsonSchema, text: string): Breach | null {
  if (nestsTooDeep(text))
    return { violation: { at: "", message: `nests deeper than ${maxNesting} levels` }, advice: depthAdvice };
  let violation: Violation | null;
  try {
    violation = validate(schema, JSON.parse(text));
  } catch (error) {
    if (!(error instanceof SyntaxError)) throw error;
    violation = { at: "", message: "is not JSON" };
  }
  return violation ? { violation, advice: partialAdvice } : null;
}

function jsonFinding(schema: JsonSchema, text: string): Finding | null {
  const breach = breachOf(schema, text);
  return breach ? { ...breach, param: "response_format.json_schema.schema", subject: "reply" } : null;
}

/** Each call's arguments against its tool's parameters; a reply that is no call, against the response_format's schema if there is one. */
function toolFinding(rules: Extract<ReplyRules, { kind: "tools" }>, text: string, syntax: ToolSyntax): Finding | null {
  const parser = new ToolCallParser(syntax);
  parser.push(text);
  parser.end();
  if (parser.mode !== "calls") return rules.text ? jsonFinding(rules.text, text) : null;
  for (const call of parser.calls) {
    const schema = rules.parameters.get(call.name);
    if (schema === undefined) continue;
    const breach = breachOf(schema, call.arguments);
    if (breach) return { ...breach, param: "tools", subject: `call to '${call.name}'` };
  }
  return null;
}

function replyFinding(rules: ReplyRules, text: string, syntax: ToolSyntax | null): Finding | null {
  if (rules.kind === "json") return jsonFinding(rules.schema, text);
  return syntax ? toolFinding(rules, text, syntax) : null;
}

/** `generation`, with each choice that stops on its own checked before its `finish` part. */
export function checkedGeneration(generation: Generation, rules: ReplyRules, syntax: ToolSyntax | null): Generation {
  async function* parts(): AsyncGenerator<ChoicePart> {
    const texts = new Map<number, string>();
    for await (const item of generation.parts) {
      const { choice, part } = item;
      if (part.type === "text-delta") texts.set(choice, (texts.get(choice) ?? "") + part.text);
      else if (part.reason === "stop") {
        const finding = replyFinding(rules, texts.get(choice) ?? "", syntax);
        if (finding) {
          const { violation, advice, param, subject } = finding;
          throw new InvalidOutputError(
            `The model's ${subject} does not satisfy its schema: the value at '${violation.at || "/"}' ${violation.message}. ${advice}`,
            param,
          );
        }
      }
      yield item;
    }
  }
  return { parts: parts(), usage: generation.usage };
}
