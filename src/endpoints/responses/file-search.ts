/**
 * The Responses API's `file_search` tool. The worker searches the named vector stores of the
 * key's account for the user's latest message, when the model asks it to (under `tool_choice`
 * `auto`: search-decision.ts, with the model's own queries) or the request forces the tool; then gives the model the
 * passages found, numbered, best first, as many as fit half the chat model's window, to answer
 * from and cite. The answer carries a `file_citation` for each passage it cites as `[n]`, or,
 * when it cites none, one for each file it was given, at the end of its text. Each store's
 * query embedding is a ledger entry of its own, billed at the store's embedding model's price,
 * once every store named is known to be the account's.
 */
import { NotFoundError, quoted } from "../../core/errors/api.js";
import type { FileCitation, FileSearchCallItem } from "../../core/wire/response.js";
import type { ResponseRequest } from "../../core/wire/responses-request.js";
import {
  checkUnexpired,
  defaultWeights,
  searchStore,
  type Found,
  type SearchIndexes,
} from "../../pipeline/store-search.js";
import type { RequestContext } from "../../http/context.js";
import { abortWith } from "../../http/respond.js";
import { serveRequest } from "../../http/serving.js";
import type { EndpointDependencies } from "../dependencies.js";
import type { ConversationItem } from "./input.js";
import { decideSearch } from "./search-decision.js";
import type { Usage } from "../../core/wire/shared.js";

/** How many passages the model is given unless the tool says: what a small model's window holds beside the conversation. */
export const defaultFileSearchResults = 5;

type Tool = NonNullable<ResponseRequest["tools"]>[number];
type FileSearchTool = Extract<Tool, { type: "file_search" }>;

/** What the search found for a response, and the output item that says so. */
export interface FileSearchRun {
  item: FileSearchCallItem;
  /** What the model is given, numbered from 1: the best passages found that fit its budget. */
  given: Found[];
}

/** A passage as the model reads it, numbered to be cited. */
const passageText = (found: Found, index: number) => `[${index + 1}] ${found.file.filename}\n${found.text}`;

/**
 * The best passages that fit half the chat model's window together, counted with its family's
 * tokenizer: the rest of the window is the conversation's and the answer's. At least none: a
 * model that is not in the catalogue is refused by chat next, and is given them all meanwhile.
 */
async function fitting(dependencies: EndpointDependencies, modelId: string, found: Found[]): Promise<Found[]> {
  const model = dependencies.catalogue.get(modelId);
  if (!model) return found;
  const tokenizer = await dependencies.tokenizers.forFamily(model.family);
  const given: Found[] = [];
  let tokens = 0;
  for (const passage of found) {
    tokens += tokenizer.encodeText(passageText(passage, given.length)).length;
    if (tokens > model.contextWindow / 2) break;
    given.push(passage);
  }
  return given;
}

/** The request as chat serves it: its function tools only, and a choice that names no `file_search`. */
export function withoutFileSearch(request: ResponseRequest): {
  tool: FileSearchTool | undefined;
  chat: ResponseRequest;
} {
  const tools = request.tools ?? [];
  const tool = tools.find((each): each is FileSearchTool => each.type === "file_search");
  if (!tool) return { tool, chat: request };
  const functions = tools.filter((each) => each.type === "function");
  const choice = request.tool_choice;
  // The search was what `required` or the choice of `file_search` asked for, and it runs anyway.
  const searched = (typeof choice === "object" && choice?.type === "file_search") || choice === "required";
  return {
    tool,
    chat: {
      ...request,
      tools: functions.length ? functions : null,
      tool_choice: searched ? "auto" : choice,
    },
  };
}

/** The text of the conversation's last user message: what is searched for. */
function lastUserText(conversation: readonly ConversationItem[]): string {
  for (let index = conversation.length - 1; index >= 0; index--) {
    const item = conversation[index]!;
    if (!("role" in item) || item.role !== "user") continue;
    if (typeof item.content === "string") return item.content.trim();
    return item.content
      .map((part) => ("text" in part ? String(part.text) : ""))
      .join("\n")
      .trim();
  }
  return "";
}

/** What a response searches for (null: nothing), and what the model used to decide it (null when it was not asked). */
interface Searching {
  queries: string[] | null;
  decision: Usage | null;
}

/**
 * What the response searches for, by `tool_choice`: under `required` or `{type: "file_search"}`
 * the user's last message; under `auto`, if the model asks for a search (search-decision.ts),
 * that message and the queries it wrote (a chunk scores its best over them: a small model's
 * poor query cannot hide what the message itself finds); under `none`, a named function or
 * `allowed_tools` (which lists functions only), nothing.
 */
async function searching(
  dependencies: EndpointDependencies,
  context: RequestContext,
  request: ResponseRequest,
  conversation: readonly ConversationItem[],
): Promise<Searching> {
  const choice = request.tool_choice ?? "auto";
  const question = lastUserText(conversation);
  if (choice === "required" || (typeof choice === "object" && choice.type === "file_search"))
    return { queries: question ? [question] : [], decision: null };
  if (choice !== "auto" || !question) return { queries: null, decision: null };
  const decided = await decideSearch(dependencies, context, request, conversation);
  const queries = decided.queries && [...new Set([question, ...decided.queries])];
  return { queries, decision: decided.usage };
}

/** The refusal of a store the tool names that is not the account's, naming the tool by its place. */
function storeRefusal(place: number) {
  const param = `tools[${place}].vector_store_ids`;
  const refusal = (storeId: string) =>
    new NotFoundError(`Vector store with id '${quoted(storeId)}' not found.`, { param });
  return Object.assign(refusal, { param });
}

/**
 * Runs the tool's search of each of its stores, best passages first, when the request or the
 * model asks for one; with the usage of the model's decision, when it was asked.
 */
export async function runFileSearch(
  dependencies: EndpointDependencies,
  indexes: SearchIndexes,
  context: RequestContext,
  request: ResponseRequest,
  conversation: readonly ConversationItem[],
): Promise<{ run: FileSearchRun | null; decision: Usage | null }> {
  const tool = withoutFileSearch(request).tool;
  if (!tool) return { run: null, decision: null };
  const notFound = storeRefusal(request.tools!.indexOf(tool));
  // Every store is the account's, and unexpired, before the model is asked and any store searched and billed.
  for (const storeId of tool.vector_store_ids) {
    const store = await dependencies.vectorStores.store(context.key.accountId, storeId);
    if (!store) throw notFound(storeId);
    checkUnexpired(store, dependencies.clock(), notFound.param);
  }
  const { queries, decision } = await searching(dependencies, context, request, conversation);
  if (!queries) return { run: null, decision };
  const limit = tool.max_num_results ?? defaultFileSearchResults;
  const found: Found[] = [];
  for (const storeId of queries.length ? tool.vector_store_ids : []) {
    // A request id of its own: the search is a ledger entry beside the response's.
    const serving = {
      ...serveRequest(context, abortWith(context.request).signal),
      requestId: dependencies.newId("req_"),
    };
    const hybrid = tool.ranking_options?.hybrid_search;
    const hits = await searchStore(dependencies, indexes, serving, storeId, {
      texts: queries,
      cut: true,
      limit,
      threshold: tool.ranking_options?.score_threshold ?? 0,
      weights: hybrid ? { embedding: hybrid.embedding_weight, text: hybrid.text_weight } : defaultWeights,
      filter: tool.filters ?? undefined,
    });
    if (!hits) throw notFound(storeId);
    found.push(...hits.found);
  }
  found.sort((a, b) => b.score - a.score);
  found.splice(limit);
  const included = request.include?.includes("file_search_call.results") === true;
  const results = found.map(({ file, text, score }) => ({
    file_id: file.fileId,
    filename: file.filename,
    score,
    attributes: file.attributes,
    text,
  }));
  const item: FileSearchCallItem = {
    id: dependencies.newId("fs_"),
    type: "file_search_call",
    status: "completed",
    queries,
    results: included ? results : null,
  };
  return { run: { item, given: await fitting(dependencies, request.model, found) }, decision };
}

/** The instructions with the passages found, numbered, for the model to answer from and cite. */
export function withPassages(request: ResponseRequest, run: FileSearchRun): ResponseRequest {
  if (run.given.length === 0) return request;
  const passages = run.given.map(passageText).join("\n\n");
  const guide =
    "Passages from the user's files, found for their question. Answer from them where they bear on it, " +
    "and cite a passage by its number in brackets, like [1].\n\n" +
    passages;
  return { ...request, instructions: request.instructions ? `${request.instructions}\n\n${guide}` : guide };
}

/**
 * The citations of an answer: one for each `[n]` that names a passage, where it stands in the
 * text; when there is none, each file the answer was given, once, at its end.
 */
export function citationsOf(text: string, run: FileSearchRun | null): FileCitation[] {
  if (!run || run.given.length === 0) return [];
  const cite = (found: Found, index: number): FileCitation => ({
    type: "file_citation",
    file_id: found.file.fileId,
    filename: found.file.filename,
    index,
  });
  const cited: FileCitation[] = [];
  for (const match of text.matchAll(/\[(\d{1,2})\]/g)) {
    const found = run.given[Number(match[1]) - 1];
    if (found) cited.push(cite(found, match.index));
  }
  if (cited.length) return cited;
  const files = new Map(run.given.map((found) => [found.file.fileId, found]));
  return [...files.values()].map((found) => cite(found, text.length));
}
