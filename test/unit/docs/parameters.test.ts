/**
 * The parameter tables of docs/api-reference.md against the zod schemas the endpoints validate
 * with: a documented parameter the schema lacks, or a schema's parameter no row names, fails.
 * A row's first cell names its parameters in backticks; what stands in parentheses there (a
 * message's roles, a value's forms) describes them and names none.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { chatCompletionRequestSchema } from "../../../src/core/wire/chat-request.js";
import { completionRequestSchema } from "../../../src/core/wire/completion-request.js";
import { embeddingRequestSchema } from "../../../src/core/wire/embeddings.js";
import { fileUploadSchema } from "../../../src/core/wire/files.js";
import { vectorStoreCreateSchema, vectorStoreSearchSchema } from "../../../src/core/wire/vector-stores.js";
import {
  compactRequestSchema,
  inputTokensRequestSchema,
  responseRequestSchema,
} from "../../../src/core/wire/responses-request.js";
import { legacyFunctionParameters } from "../../../src/endpoints/chat/legacy-functions.js";

const reference = readFileSync(join(resolve(import.meta.dirname, "../../.."), "docs/api-reference.md"), "utf8");

/** The first cells of the table whose header is `| parameter (<name>) |`. */
function firstCells(name: string): string[] {
  const lines = reference.split("\n");
  const start = lines.findIndex((line) => line.startsWith(`| parameter (${name}) |`));
  if (start < 0) throw new Error(`docs/api-reference.md has no table headed "parameter (${name})"`);
  const rows: string[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(line.slice(1, line.indexOf(" |", 1)));
  }
  return rows;
}

/** What a cell says outside its parentheses, nested or not. */
function outsideParentheses(cell: string): string {
  let depth = 0;
  let kept = "";
  for (const character of cell) {
    if (character === "(") depth++;
    else if (character === ")") depth = Math.max(0, depth - 1);
    else if (depth === 0) kept += character;
  }
  return kept;
}

/** The top-level parameters a table names: `stream_options.include_usage` names `stream_options`. */
function documentedParameters(name: string): Set<string> {
  const names = new Set<string>();
  for (const cell of firstCells(name))
    for (const [, code] of outsideParentheses(cell).matchAll(/`([^`]+)`/g)) {
      const parameter = /^[a-z_]+/.exec(code!)?.[0];
      if (!parameter) throw new Error(`"${code}" in the table "parameter (${name})" names no parameter`);
      names.add(parameter);
    }
  return names;
}

function schemaParameters(schema: z.ZodObject): string[] {
  return Object.keys(schema.shape);
}

const tables: [string, string[]][] = [
  ["chat", [...schemaParameters(chatCompletionRequestSchema), ...legacyFunctionParameters]],
  ["completions", schemaParameters(completionRequestSchema)],
  ["embeddings", schemaParameters(embeddingRequestSchema)],
  ["files", schemaParameters(fileUploadSchema)],
  ["vector_stores", schemaParameters(vectorStoreCreateSchema)],
  ["vector_store_search", schemaParameters(vectorStoreSearchSchema)],
  ["responses", schemaParameters(responseRequestSchema)],
  ["compact", schemaParameters(compactRequestSchema)],
  ["input_tokens", schemaParameters(inputTokensRequestSchema)],
];

describe("docs/api-reference.md's parameter tables", () => {
  it.each(tables)("the %s table names exactly its schema's parameters", (name, parameters) => {
    expect([...documentedParameters(name)].sort()).toEqual([...new Set(parameters)].sort());
  });

  it("reads a cell's names outside its parentheses only", () => {
    expect(outsideParentheses("`model`, `input` (items: `item_reference`, (`a`)), `stream`")).toBe(
      "`model`, `input` , `stream`",
    );
  });
});
