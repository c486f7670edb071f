/**
 * `response_format` and `tools` for a chat request: which constraint the engine decodes under,
 * which tools enter the prompt, and whether the prompt must be ours (tools, tool history) rather
 * than the engine's own chat template. Nothing asked for is silently dropped: what cannot be
 * honoured is a 400 that names it.
 */
import type { ModelFamily } from "../model/families.js";
import type { EngineMessage } from "../prompt/messages.js";
import type { OutputConstraint, ToolChoiceSpec } from "../engine/contract.js";
import { BadRequestError } from "../errors/api.js";
import { checkSchema } from "../grammar/check.js";
import { checkFinite } from "../grammar/finite.js";
import { literal } from "../grammar/ebnf.js";
import { UnsupportedSchemaError, type JsonSchema } from "../grammar/schema.js";
import { GrammarBuilder, grammarFor, schemaToGrammar } from "../grammar/schema-grammar.js";
import { toolSyntax, type ToolSpec } from "../prompt/templates.js";
import type { ChatCompletionRequest } from "../wire/chat-request.js";

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
}

export type ReplyRules = { kind: "json"; schema: JsonSchema } | { kind: "tools"; parameters: Map<string, JsonSchema> };

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

function toolsOf(request: ChatCompletionRequest): ToolSpec[] | null {
  const choice = request.tool_choice;
  if (!request.tools?.length) {
    if (choice && choice !== "none" && choice !== "auto") {
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
  if (choice && typeof choice === "object" && !names.has(choice.function.name)) {
    throw new BadRequestError(
      `Invalid value for 'tool_choice': no function named '${choice.function.name}' was specified in 'tools'.`,
      {
        param: "tool_choice.function.name",
      },
    );
  }
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
 * begin like a call.
 */
export function toolGrammar(
  family: ModelFamily,
  tools: readonly ToolSpec[],
  choice: ToolChoiceSpec,
  parallel: boolean,
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
  const text = builder.rule("text", `${notStartingWith(syntax.openers.map((opener) => opener[0] ?? ""))} [^\\x00]*`);
  return builder.build(`${replies} | ${text}`);
}

/** Tool mode: the grammar of the calls `tool_choice` allows, and each tool's parameters to check the calls against. */
function toolPlan(
  request: ChatCompletionRequest,
  family: ModelFamily,
  messages: EngineMessage[],
  tools: ToolSpec[],
  ownPrompt: boolean,
): StructuredPlan {
  const raw = request.tool_choice ?? "auto";
  const choice: ToolChoiceSpec =
    typeof raw === "object" ? { name: raw.function.name } : raw === "required" ? "required" : "auto";
  const parallel = request.parallel_tool_calls ?? true;
  return {
    messages,
    tools,
    ownPrompt,
    rules: { kind: "tools", parameters: new Map(tools.map((tool) => [tool.name, tool.parameters as JsonSchema])) },
    constraint: {
      kind: "tools",
      grammar: schemaWork("tools", () => toolGrammar(family, tools, choice, parallel)),
      tools,
      choice,
      parallel,
      afterToolResult: messages.at(-1)?.role === "tool",
    },
  };
}

export function planStructured(
  request: ChatCompletionRequest,
  family: ModelFamily,
  messages: EngineMessage[],
): StructuredPlan {
  const tools = toolsOf(request);
  const toolMode = tools !== null && request.tool_choice !== "none";
  const format = request.response_format;
  const wantsJson = format?.type === "json_object" || format?.type === "json_schema";
  if (toolMode && wantsJson) {
    throw new BadRequestError(
      "'response_format' together with 'tools' is not supported: a reply is either a tool call or JSON. Send one of them.",
      {
        param: "response_format",
        code: "unsupported_request",
      },
    );
  }
  const ownPrompt =
    toolMode || messages.some((message) => message.role === "tool" || (message.toolCalls?.length ?? 0) > 0);

  if (toolMode) return toolPlan(request, family, messages, tools, ownPrompt);
  if (!wantsJson) return { messages, tools: null, ownPrompt };
  // Our own compact grammars, for JSON mode too: no whitespace for a model to wander in.
  let constraint: OutputConstraint = { kind: "json", grammar: schemaToGrammar({ type: "object" }) };
  let instruction = jsonInstruction;
  let rules: ReplyRules | undefined;
  if (format?.type === "json_schema") {
    const param = "response_format.json_schema.schema";
    const schema = checked(format.json_schema.schema ?? {}, param);
    constraint = {
      kind: "json",
      schema: JSON.stringify(schema),
      // Checked above: built without checking again.
      grammar: schemaWork(param, () => grammarFor(schema)),
    };
    instruction = `${jsonInstruction} It must match this JSON Schema: ${JSON.stringify(schema)}`;
    rules = { kind: "json", schema };
  }
  // The hosted API requires JSON mode requests to ask for JSON; we ask on the caller's behalf.
  const mentionsJson = messages.some((message) => /json/i.test(message.content));
  if (mentionsJson && format?.type === "json_object") return { messages, tools: null, ownPrompt, constraint };
  const [first, ...rest] = messages;
  const withInstruction: EngineMessage[] =
    first?.role === "system"
      ? [{ ...first, content: `${first.content}\n\n${instruction}` }, ...rest]
      : [{ role: "system", content: instruction }, ...messages];
  return { messages: withInstruction, tools: null, ownPrompt, constraint, ...(rules ? { rules } : {}) };
}
