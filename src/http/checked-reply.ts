/**
 * The check of a finished structured reply. The grammar enforces most keywords whole; a few
 * (number bounds off whole units, `multipleOf`, `uniqueItems`, a pattern beside a format) only in
 * part, so every reply that stopped on its own is validated against its schema before its
 * `finish` goes out, and one that breaks it ends as an error, never as a success.
 */
import { InvalidOutputError } from "../errors/api.js";
import type { JsonSchema } from "../grammar/schema.js";
import { validate, type Violation } from "../grammar/validate.js";
import { ToolCallParser } from "../prompt/tool-calls.js";
import type { ToolSyntax } from "../prompt/templates.js";
import type { ChoicePart, Generation } from "../serve/generation.js";
import type { ReplyRules } from "./structured.js";

interface Finding {
  violation: Violation;
  param: string;
  subject: string;
}

function parsed(text: string): { value: unknown } | null {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return null;
  }
}

function jsonFinding(schema: JsonSchema, text: string): Finding | null {
  const param = "response_format.json_schema.schema";
  const reply = parsed(text);
  const violation = reply ? validate(schema, reply.value) : { at: "", message: "is not JSON" };
  return violation ? { violation, param, subject: "reply" } : null;
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
    const argumentsValue = parsed(call.arguments);
    const violation = argumentsValue ? validate(schema, argumentsValue.value) : { at: "", message: "is not JSON" };
    if (violation) return { violation, param: "tools", subject: `arguments of its call to '${call.name}'` };
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
          const { violation, param, subject } = finding;
          throw new InvalidOutputError(
            `The model's ${subject} does not satisfy its schema: the value at '${violation.at || "/"}' ${violation.message}. ` +
              "The grammar enforces this keyword only in part and the finished value is checked (see the README's keyword table); " +
              "retry the request, or state the rule in a form the grammar enforces whole.",
            param,
          );
        }
      }
      yield item;
    }
  }
  return { parts: parts(), usage: generation.usage };
}
