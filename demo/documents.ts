/**
 * The Documents view: a person's files, uploaded, listed and deleted through the API's own
 * `/v1/files` with the chat key (the openai SDK's `files`), as any app would; the account's
 * stored data against its quota through the admin API.
 */
import { button, cell, describeError, element, feedback, labelCells } from "./dom.js";
import type { FileObject } from "openai/resources/files";
import type { DemoState } from "./state.js";

/** A size as the API counts it (a megabyte is 10⁶ bytes, as the storage quota is set). */
function size(bytes: number): string {
  if (bytes < 1000) return `${bytes} bytes`;
  return bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

function fileRow(file: FileObject, remove: () => void): HTMLTableRowElement {
  const row = document.createElement("tr");
  const removal = button("Delete", remove);
  removal.setAttribute("aria-label", `Delete ${file.filename}`);
  row.append(
    cell(file.filename),
    cell(size(file.bytes), "number"),
    cell(new Date(file.created_at * 1000).toLocaleString()),
    cell(removal),
  );
  return row;
}

function emptyRow(): HTMLTableRowElement {
  const row = document.createElement("tr");
  const only = cell("No documents yet.");
  only.colSpan = 4;
  row.append(only);
  return row;
}

export function setupDocuments(state: DemoState) {
  const input = element<HTMLInputElement>("documents-input");
  const drop = element<HTMLLabelElement>("documents-drop");
  const usage = element<HTMLParagraphElement>("documents-usage");
  const message = element<HTMLParagraphElement>("documents-feedback");
  const table = element<HTMLTableElement>("documents-table");

  async function render(): Promise<void> {
    if (!state.client) return;
    const rows: HTMLTableRowElement[] = [];
    for await (const file of state.client.files.list({ purpose: "user_data" }))
      rows.push(fileRow(file, () => void removeFile(file.id, file.filename)));
    if (rows.length === 0) rows.push(emptyRow());
    table.tBodies[0]!.replaceChildren(...rows);
    labelCells(table);
    if (state.handle && state.accountId) {
      const report = await state.handle.admin.storageUsage(state.accountId);
      usage.textContent = `This account stores ${size(report.bytes)} of its ${size(report.quota.bytes)} (${report.kinds.files.items} files).`;
    }
  }

  async function upload(files: readonly File[]): Promise<void> {
    if (!state.client || files.length === 0) return;
    try {
      for (const [index, file] of files.entries()) {
        feedback(message, `Uploading ${file.name} (${index + 1} of ${files.length})…`);
        await state.client.files.create({ file, purpose: "user_data" });
      }
      feedback(message, files.length === 1 ? `Uploaded ${files[0]!.name}.` : `Uploaded ${files.length} files.`);
    } catch (error) {
      feedback(message, describeError(error).text, true);
    }
    await render();
  }

  async function removeFile(id: string, name: string): Promise<void> {
    try {
      await state.client?.files.delete(id);
      feedback(message, `Deleted ${name}.`);
    } catch (error) {
      feedback(message, describeError(error).text, true);
    }
    await render();
  }

  input.addEventListener("change", () => {
    void upload([...(input.files ?? [])]).finally(() => (input.value = ""));
  });
  acceptDrops(drop, (files) => void upload(files));
  return { render };
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
