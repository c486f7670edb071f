/**
 * The Documents view: a person's files, uploaded through the API's own `/v1/files` and indexed in
 * the account's one demo vector store (`/v1/vector_stores`) with the chat key, as any app would:
 * chosen or dropped, indexed in the worker's background with its progress (chunks, tokens and
 * cost), searched, and deleted; the account's storage against its quota through the admin API.
 */
import OpenAI from "openai";
import type { FileObject } from "openai/resources/files";
import type { VectorStoreFile } from "openai/resources/vector-stores/files";
import { button, cell, describeError, element, feedback, labelCells } from "./dom.js";
import type { DemoState } from "./state.js";

/** A size as the API counts it (a megabyte is 10⁶ bytes, as the storage quota is set). */
function size(bytes: number): string {
  if (bytes < 1000) return `${bytes} bytes`;
  return bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

/** How far a store's file has come: this API's own field beside OpenAI's. */
interface Indexing {
  chunks: number | null;
  embedded_chunks: number;
  embedded_tokens: number;
}

const storeKey = (accountId: string) => `webgpu-inference-demo-store:${accountId}`;

/** The id of the account's demo store, if this browser made one that still exists; nothing is created. */
export async function knownStore(state: DemoState): Promise<string | undefined> {
  if (!state.client || !state.accountId) return undefined;
  const id = localStorage.getItem(storeKey(state.accountId));
  if (!id) return undefined;
  try {
    return (await state.client.vectorStores.retrieve(id)).id;
  } catch (error) {
    if (error instanceof OpenAI.NotFoundError) localStorage.removeItem(storeKey(state.accountId));
    else throw error;
    return undefined;
  }
}

/** The account's demo store, made on first use. */
async function documentStore(state: DemoState, client: OpenAI): Promise<string> {
  const known = await knownStore(state);
  if (known) return known;
  const store = await client.vectorStores.create({ name: "Documents" });
  if (state.accountId) localStorage.setItem(storeKey(state.accountId), store.id);
  return store.id;
}

const chunksText = (count: number) => `${count} ${count === 1 ? "chunk" : "chunks"}`;

/** What the Indexing cell says, with a progress bar while it runs. */
function indexingCell(stored: VectorStoreFile | undefined, price: number | undefined): HTMLTableCellElement {
  if (!stored) return cell("Not indexed");
  const indexing = (stored as VectorStoreFile & { indexing?: Indexing }).indexing;
  const chunks = indexing?.chunks ?? null;
  if (stored.status === "failed") return cell(`Failed: ${stored.last_error?.message ?? "unknown reason"}`);
  if (stored.status === "cancelled") return cell("Cancelled");
  const tokens = indexing?.embedded_tokens ?? 0;
  const cost = price === undefined ? "" : ` · $${((tokens * price) / 1e6).toFixed(9)}`;
  if (stored.status === "completed")
    return cell(`Indexed: ${chunksText(chunks ?? 0)} · ${tokens.toLocaleString("en-US")} tokens${cost}`);
  if (chunks === null) return cell("Reading…");
  const bar = Object.assign(document.createElement("progress"), { max: chunks, value: indexing!.embedded_chunks });
  bar.setAttribute("aria-label", "Indexing progress");
  const td = cell(bar);
  td.append(` ${indexing!.embedded_chunks} of ${chunksText(chunks)} · ${tokens.toLocaleString("en-US")} tokens${cost}`);
  return td;
}

function fileRow(file: FileObject, indexing: HTMLTableCellElement, remove: () => void): HTMLTableRowElement {
  const row = document.createElement("tr");
  const removal = button("Delete", remove);
  removal.setAttribute("aria-label", `Delete ${file.filename}`);
  row.append(
    cell(file.filename),
    cell(size(file.bytes), "number"),
    indexing,
    cell(new Date(file.created_at * 1000).toLocaleString()),
    cell(removal),
  );
  return row;
}

function emptyRow(): HTMLTableRowElement {
  const row = document.createElement("tr");
  const only = cell("No documents yet.");
  only.colSpan = 5;
  row.append(only);
  return row;
}

export function setupDocuments(state: DemoState) {
  const view = new DocumentsView(state);
  const input = element<HTMLInputElement>("documents-input");
  input.addEventListener("change", () => {
    void view.upload([...(input.files ?? [])]).finally(() => (input.value = ""));
  });
  acceptDrops(element("documents-drop"), (files) => void view.upload(files));
  element<HTMLFormElement>("documents-search").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = element<HTMLInputElement>("documents-query").value.trim();
    if (query) void view.search(query);
  });
  return { render: () => view.render() };
}

class DocumentsView {
  readonly #state: DemoState;
  readonly #usage = element<HTMLParagraphElement>("documents-usage");
  readonly #message = element<HTMLParagraphElement>("documents-feedback");
  readonly #table = element<HTMLTableElement>("documents-table");
  readonly #results = element<HTMLOListElement>("documents-results");
  readonly #searchFeedback = element<HTMLParagraphElement>("documents-search-feedback");
  #polling: ReturnType<typeof setTimeout> | undefined;

  constructor(state: DemoState) {
    this.#state = state;
  }

  /** The account's files, each with its indexing; polled while any is being indexed and the view is shown. */
  async render(): Promise<void> {
    clearTimeout(this.#polling);
    const { client, handle, accountId } = this.#state;
    if (!client) return;
    const storeId = await knownStore(this.#state);
    const stored = new Map<string, VectorStoreFile>();
    if (storeId) for await (const file of client.vectorStores.files.list(storeId)) stored.set(file.id, file);
    const store = storeId ? await client.vectorStores.retrieve(storeId) : undefined;
    const model = (store as { embedding_model?: string } | undefined)?.embedding_model;
    const price = this.#state.models.find((each) => each.id === model)?.pricing.input_per_1m_tokens;
    const rows: HTMLTableRowElement[] = [];
    for await (const file of client.files.list({ purpose: "user_data" }))
      rows.push(fileRow(file, indexingCell(stored.get(file.id), price), () => void this.#remove(file)));
    if (rows.length === 0) rows.push(emptyRow());
    this.#table.tBodies[0]!.replaceChildren(...rows);
    labelCells(this.#table);
    if (handle && accountId) {
      const report = await handle.admin.storageUsage(accountId);
      this.#usage.textContent = `This account stores ${size(report.bytes)} of its ${size(report.quota.bytes)} (${report.kinds.files.items} files).`;
    }
    const indexing = [...stored.values()].some((file) => file.status === "in_progress");
    if (indexing && !element("view-documents").hidden)
      this.#polling = setTimeout(() => void this.render().catch(() => undefined), 700);
  }

  async upload(files: readonly File[]): Promise<void> {
    const client = this.#state.client;
    if (!client || files.length === 0) return;
    try {
      const storeId = await documentStore(this.#state, client);
      for (const [index, file] of files.entries()) {
        feedback(this.#message, `Uploading ${file.name} (${index + 1} of ${files.length})…`);
        const uploaded = await client.files.create({ file, purpose: "user_data" });
        await client.vectorStores.files.create(storeId, { file_id: uploaded.id });
      }
      feedback(
        this.#message,
        files.length === 1
          ? `Uploaded ${files[0]!.name}; it is being indexed.`
          : `Uploaded ${files.length} files; they are being indexed.`,
      );
    } catch (error) {
      feedback(this.#message, describeError(error).text, true);
    }
    await this.render();
  }

  async #remove(file: FileObject): Promise<void> {
    const client = this.#state.client;
    try {
      const storeId = await knownStore(this.#state);
      if (storeId)
        await client?.vectorStores.files.delete(file.id, { vector_store_id: storeId }).catch((error: unknown) => {
          if (!(error instanceof OpenAI.NotFoundError)) throw error;
        });
      await client?.files.delete(file.id);
      feedback(this.#message, `Deleted ${file.filename}.`);
    } catch (error) {
      feedback(this.#message, describeError(error).text, true);
    }
    await this.render();
  }

  async search(query: string): Promise<void> {
    const storeId = await knownStore(this.#state);
    const client = this.#state.client;
    if (!client || !storeId) {
      this.#results.replaceChildren();
      feedback(this.#searchFeedback, "There is nothing to search yet: upload a document first.");
      return;
    }
    try {
      const found = [];
      for await (const result of client.vectorStores.search(storeId, { query, max_num_results: 5 })) found.push(result);
      this.#results.replaceChildren(...found.map(resultItem));
      feedback(this.#searchFeedback, found.length ? `${found.length} passages found.` : "Nothing found.");
    } catch (error) {
      feedback(this.#searchFeedback, describeError(error).text, true);
    }
  }
}

/** A passage found: its file, its score, and its text (as text: a document is never markup here). */
function resultItem(result: OpenAI.VectorStores.VectorStoreSearchResponse): HTMLLIElement {
  const li = document.createElement("li");
  const heading = document.createElement("p");
  heading.append(
    Object.assign(document.createElement("strong"), { textContent: result.filename }),
    ` · score ${result.score.toFixed(2)}`,
  );
  const text = result.content.map((part) => part.text).join("\n");
  li.append(heading, Object.assign(document.createElement("blockquote"), { textContent: text }));
  return li;
}

/** Files dropped on `target` go to `take`; the target shows when a drop would land. */
function acceptDrops(target: HTMLElement, take: (files: File[]) => void): void {
  target.addEventListener("dragover", (event) => {
    event.preventDefault();
    target.classList.add("over");
  });
  target.addEventListener("dragleave", () => target.classList.remove("over"));
  target.addEventListener("drop", (event) => {
    event.preventDefault();
    target.classList.remove("over");
    take([...(event.dataTransfer?.files ?? [])]);
  });
}
