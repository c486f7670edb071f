/**
 * `response_format` and `tools` for a chat request: which constraint the engine decodes under,
 * which tools enter the prompt, and whether the prompt must be ours (tools, tool history) rather
 * than the engine's own chat template. Nothing asked for is silently dropped: what cannot be
 * honoured is a 400 that names it.
 */
import type { ModelFamily } from "../../catalogue/families.js";
import type { EngineMessage } from "../../prompt/messages.js";
import type { OutputConstraint, ToolChoiceSpec } from "../../engines/contract.js";
import { BadRequestError, quoted } from "../../core/errors/api.js";
import { checkSchema } from "../../structured/check.js";
import { checkFinite } from "../../structured/finite.js";
import { literal } from "../../structured/ebnf.js";
import { UnsupportedSchemaError, type JsonSchema } from "../../structured/schema.js";
import { GrammarBuilder, grammarFor, schemaToGrammar } from "../../structured/schema-grammar.js";
import { toolSyntax, type ToolSpec, type ToolSyntax } from "../../prompt/templates.js";
import type { ChatCompletionRequest } from "../../core/wire/chat-request.js";

export interface StructuredPlan {
  /** The messages, with the JSON instruction added when JSON mode needs one. */
  messages: EngineMessage[];
  /** Tool mode: the tools in the prompt, whose calls the reply may hold. */
  tools: ToolSpec[] | null;
  constraint?: OutputConstraint;
  /** Render the prompt ourselves: needed for tools and for tool turns in the history. */
  ownPrompt: boolean;
  /** What a finished reply is checked against: the JSON schema, or each tool's parameters by name. */
  rules?: ReplyRules;
  /** Tool mode: how the reply is read, calls apart from text (the family's syntax, its openers made exact where a JSON reply could begin like a call). */
  syntax?: ToolSyntax;
}

/** `text`: in tool mode with a `response_format`, the schema a reply that is not a call must match. */
export type ReplyRules =
  { kind: "json"; schema: JsonSchema } | { kind: "tools"; parameters: Map<string, JsonSchema>; text?: JsonSchema };

const jsonInstruction = "Respond with a JSON object.";

/** Runs `work` (a check, a grammar), turning a schema we cannot honour into a 400 that names it. */
function schemaWork<T>(param: string, work: () => T): T {
  try {
    return work();
  } catch (error) {
    if (error instanceof UnsupportedSchemaError) {
      throw new BadRequestError(
        `Invalid schema for '${param}'${error.pointer ? ` at ${error.pointer}` : ""}: ${error.message}.`,
        { param, code: "invalid_schema" },
      );
    }
    throw error;
  }
}

function checked(schema: unknown, param: string): JsonSchema {
  schemaWork(param, () => {
    checkSchema(schema);
    checkFinite(schema as JsonSchema);
  });
  return schema as JsonSchema;
}

/** A `tool_choice` naming a function that `tools` does not give; the name quoted at most 64 characters long. */
export function noSuchTool(name: string, param: string): BadRequestError {
  return new BadRequestError(
    `Invalid value for 'tool_choice': no function named '${quoted(name)}' was specified in 'tools'.`,
    { param },
  );
}

function toolsOf(request: ChatCompletionRequest): ToolSpec[] | null {
  const choice = request.tool_choice;
  if (!request.tools?.length) {
    // Any choice, `none` and `auto` too: the hosted API refuses each without tools.
    if (choice != null) {
      throw new BadRequestError(
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
        { param: "tool_choice" },
      );
    }
    if (request.parallel_tool_calls != null)
      throw new BadRequestError(
        "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.",
        { param: "parallel_tool_calls" },
      );
    return null;
  }
  const names = new Set<string>();
  request.tools.forEach((tool, index) => {
    if (names.has(tool.function.name)) {
      throw new BadRequestError(`Invalid 'tools': the function name '${tool.function.name}' is given twice.`, {
        param: `tools[${index}].function.name`,
      });
    }
    names.add(tool.function.name);
  });
  if (typeof choice === "object" && choice?.type === "function" && !names.has(choice.function.name))
    throw noSuchTool(choice.function.name, "tool_choice.function.name");
  return request.tools.map((tool, index) => ({
    name: tool.function.name,
    ...(tool.function.description !== undefined ? { description: tool.function.description } : {}),
    parameters: checked(
      tool.function.parameters ?? { type: "object", properties: {} },
      `tools[${index}].function.parameters`,
    ) as Record<string, unknown>,
  }));
}

/** An EBNF character class of everything but `excluded` and whitespace or control characters. */
function notStartingWith(excluded: readonly string[]): string {
  const escaped = [...new Set(excluded)]
    .map((character) => (/[\\\][^-]/.test(character) ? `\\${character}` : character))
    .join("");
  return `[^${escaped}\\x00-\\x20]`;
}

/**
 * The grammar of a reply under `choice`: one of the tools' calls (or several, when parallel),
 * with arguments that match each tool's parameters; under `auto`, also any text that does not
 * begin like a call, or, given `textSchema` (a response_format), that schema's JSON.
 */
export function toolGrammar(
  family: ModelFamily,
  tools: readonly ToolSpec[],
  choice: ToolChoiceSpec,
  parallel: boolean,
  textSchema?: JsonSchema,
): string {
  const syntax = toolSyntax[family];
  const builder = new GrammarBuilder({ pythonSpacing: true });
  const selected = typeof choice === "object" ? tools.filter((tool) => tool.name === choice.name) : tools;
  const calls = selected.map((tool, index) => {
    const schema = tool.parameters as JsonSchema;
    const argumentsExpression = builder.schema(schema, schema, `arguments_${index}`);
    return builder.rule(
      `call_${index}`,
      `"{" ${literal('"name"')} ${builder.colon} ${literal(JSON.stringify(tool.name))} ${builder.comma} ${literal(JSON.stringify(syntax.argumentsKey))} ${builder.colon} ${argumentsExpression} "}"`,
    );
  });
  const call = builder.rule("call", calls.join(" | "));
  const replies = syntax.grammar(call, parallel && typeof choice !== "object");
  if (choice !== "auto") return builder.build(replies);
  // Under a response_format, a reply that is no call is the format's JSON.
  const text = textSchema
    ? builder.schema(textSchema, textSchema, "reply")
    : builder.rule("text", `${notStartingWith(syntax.openers.map((opener) => opener[0] ?? ""))} [^\\x00]*`);
  return builder.build(`${replies} | ${text}`);
}

/** The JSON a `response_format` asks for: the schema a reply must match, and the instruction that asks for it. */
interface JsonReply {
  schema: JsonSchema;
  /** The client's own schema (json_schema), rather than json_object's any object. */
  declared: boolean;
  instruction: string;
}

function jsonReplyOf(request: ChatCompletionRequest): JsonReply | null {
  const format = request.response_format;
  if (format?.type === "json_object")
    return { schema: { type: "object" }, declared: false, instruction: jsonInstruction };
  if (format?.type !== "json_schema") return null;
  const schema = checked(format.json_schema.schema ?? {}, "response_format.json_schema.schema");
  const instruction = `${jsonInstruction} It must match this JSON Schema: ${JSON.stringify(schema)}`;
  return { schema, declared: true, instruction };
}

/**
 * The messages with the JSON instruction in the system turn. The hosted API requires JSON mode
 * requests to ask for JSON; we ask on the caller's behalf, unless a json_object request already does.
 */
function askingForJson(messages: EngineMessage[], json: JsonReply): EngineMessage[] {
  if (!json.declared && messages.some((message) => /json/i.test(message.content))) return messages;
  const [first, ...rest] = messages;
  return first?.role === "system"
    ? [{ ...first, content: `${first.content}\n\n${json.instruction}` }, ...rest]
    : [{ role: "system", content: json.instruction }, ...messages];
}

/**
 * Tool mode: the grammar of the calls `tool_choice` allows, and each tool's parameters to check
 * the calls against. With a response_format under `auto`, a reply is a call or the format's JSON
 * (as OpenAI's agents ask, tools and an output type together); a reply that must be a call has
 * no use for the format.
 */
function toolPlan(
  request: ChatCompletionRequest,
  family: ModelFamily,
  messages: EngineMessage[],
  tools: ToolSpec[],
  json: JsonReply | null,
): StructuredPlan {
  const raw = request.tool_choice ?? "auto";
  // `allowed_tools` was narrowed to its mode before (endpoints/chat/allowed-tools.ts).
  const choice: ToolChoiceSpec =
    typeof raw !== "object"
      ? raw === "required"
        ? "required"
        : "auto"
      : raw.type === "function"
        ? { name: raw.function.name }
        : raw.allowed_tools.mode;
  const parallel = request.parallel_tool_calls ?? true;
  const text = choice === "auto" ? json : null;
  const syntax = toolSyntax[family];
  const parameters = new Map(tools.map((tool) => [tool.name, tool.parameters as JsonSchema]));
  return {
    messages: text ? askingForJson(messages, text) : messages,
    tools,
    ownPrompt: true,
    rules: { kind: "tools", parameters, ...(text ? { text: text.schema } : {}) },
    constraint: {
      kind: "tools",
      grammar: schemaWork("tools", () => toolGrammar(family, tools, choice, parallel, text?.schema)),
      tools,
      choice,
      parallel,
      afterToolResult: messages.at(-1)?.role === "tool",
      ...(text ? { text: text.declared ? { schema: JSON.stringify(text.schema) } : {} } : {}),
    },
    // Where a call is JSON itself (Llama), only a call's own opening tells it from a JSON reply.
    ...(text && syntax.openersBeside ? { syntax: { ...syntax, openers: syntax.openersBeside(tools) } } : {}),
  };
}

export function planStructured(
  request: ChatCompletionRequest,
  family: ModelFamily,
  messages: EngineMessage[],
): StructuredPlan {
  const tools = toolsOf(request);
  const json = jsonReplyOf(request);
  if (tools !== null && request.tool_choice !== "none") return toolPlan(request, family, messages, tools, json);
  const ownPrompt = messages.some((message) => message.role === "tool" || (message.toolCalls?.length ?? 0) > 0);
  if (!json) return { messages, tools: null, ownPrompt };
  // Our own compact grammars, for JSON mode too: no whitespace for a model to wander in.
  const param = "response_format.json_schema.schema";
  const constraint: OutputConstraint = json.declared
    ? { kind: "json", schema: JSON.stringify(json.schema), grammar: schemaWork(param, () => grammarFor(json.schema)) }
    : { kind: "json", grammar: schemaToGrammar(json.schema) };
  return {
    messages: askingForJson(messages, json),
    tools: null,
    ownPrompt,
    constraint,
    ...(json.declared ? { rules: { kind: "json", schema: json.schema } } : {}),
  };
}
