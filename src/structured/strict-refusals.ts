/**
 * Schemas sent with `strict: true` are held to OpenAI's strict-mode rules (structured/strict.ts)
 * before a request is served, local or remote, and one that breaks a rule is refused as the hosted
 * API refuses it: "Invalid schema for response_format 'name': In context=('properties', 'a'),
 * 'additionalProperties' is required to be supplied and to be false." An app that works here then
 * works there. Without `strict`, a schema is taken as written (endpoints/chat/structured.ts checks it).
 * A map (`additionalProperties` a schema, no `properties`) is taken beyond those rules, and the
 * answer says so in `x-inference-beyond-strict`.
 */
import { BadRequestError, quoted } from "../core/errors/api.js";
import { strictCheck, type StrictRule } from "./strict.js";
import type { ChatCompletionRequest } from "../core/wire/chat-request.js";

/** A string as Python's `repr` writes it, which OpenAI's contexts are written in. */
function pythonString(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escapes: Record<string, string> = {
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    [quote]: `\\${quote}`,
  };
  return `${quote}${text.replace(/[\\\n\r\t'"]/g, (character) => escapes[character] ?? character)}${quote}`;
}

/** A tuple of strings as Python's `repr` writes it: `()`, `('a',)`, `('a', 'b')`. */
function pythonTuple(items: readonly string[]): string {
  const written = items.map((item) => pythonString(quoted(item)));
  return written.length === 1 ? `(${written[0]},)` : `(${written.join(", ")})`;
}

function sentence(rule: StrictRule): string {
  const everyKey = "'required' is required to be supplied and to be an array including every key in properties.";
  switch (rule.kind) {
    case "rootType":
      return `schema must be a JSON Schema of 'type: "object"', got 'type: "${quoted(rule.type)}"'.`;
    case "additionalProperties":
      return "'additionalProperties' is required to be supplied and to be false.";
    case "properties":
      return "object schema missing properties.";
    case "typeKey":
      return "schema must have a 'type' key.";
    case "missingRequired":
      return `${everyKey} Missing '${quoted(rule.key)}'.`;
    case "extraRequired":
      return `${everyKey} Extra required key '${quoted(rule.key)}' supplied.`;
  }
}

/**
 * Refuses `schema` if it breaks a strict-mode rule; `subject` is "response_format 'name'" or
 * "function 'name'". Returns the maps it holds beyond OpenAI's rules, each as "subject ('context',)".
 */
function refuseBroken(
  schema: Record<string, unknown>,
  subject: string,
  options: { param: string; code: string },
): string[] {
  const { violation, maps } = strictCheck(schema);
  if (violation) {
    const place = violation.rule.kind === "rootType" ? "" : `In context=${pythonTuple(violation.context)}, `;
    throw new BadRequestError(`Invalid schema for ${subject}: ${place}${sentence(violation.rule)}`, options);
  }
  return maps.map((context) => `${subject} ${pythonTuple(context)}`);
}

/**
 * Holds a chat request's strict response format and strict functions (all given, in order) to the
 * rules; returns the places where a map was taken beyond them (see structured/strict.ts).
 */
export function checkStrictSchemas(request: ChatCompletionRequest): string[] {
  const maps: string[] = [];
  const format = request.response_format;
  if (format?.type === "json_schema" && format.json_schema.strict === true && format.json_schema.schema) {
    maps.push(
      ...refuseBroken(format.json_schema.schema, `response_format '${quoted(format.json_schema.name)}'`, {
        param: "response_format.json_schema.schema",
        code: "invalid_json_schema",
      }),
    );
  }
  request.tools?.forEach((tool, index) => {
    if (tool.function.strict !== true || !tool.function.parameters) return;
    maps.push(
      ...refuseBroken(tool.function.parameters, `function '${quoted(tool.function.name)}'`, {
        param: `tools[${index}].function.parameters`,
        code: "invalid_function_parameters",
      }),
    );
  });
  return maps;
}
