/** Small DOM and wording helpers the views share. */
import OpenAI from "openai";

export function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing from the page`);
  return found as T;
}

export function cell(content: string | Node, className?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.append(content);
  if (className) td.className = className;
  return td;
}

/** Narrow screens show each row as a card; each cell then names its column. */
export function labelCells(table: HTMLTableElement): void {
  const headings = [...table.tHead!.rows[0]!.cells].map((heading) => heading.textContent ?? "");
  for (const row of table.tBodies[0]!.rows)
    [...row.cells].forEach((td, index) => td.setAttribute("data-label", headings[index] ?? ""));
}

export function button(label: string, run: () => void, secondary = true): HTMLButtonElement {
  const made = document.createElement("button");
  made.type = "button";
  made.textContent = label;
  if (secondary) made.className = "secondary";
  made.addEventListener("click", run);
  return made;
}

/** A control's own feedback line: an error stays until the next try; success clears it or confirms. */
export function feedback(target: HTMLElement, text: string, isError = false): void {
  target.textContent = text;
  target.classList.toggle("error", isError);
}

/** Dollars to the nano-dollar, without trailing zeros past the cents. */
export const usd = (nano: number) => `$${(nano / 1e9).toFixed(9).replace(/(\.\d\d\d*?)0+$/, "$1")}`;
export const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(bytes > 100 * 1024 * 1024 ? 0 : 1)} MB`;
/** A size given in MB, in GB from 1 GB up. */
export const gigabytes = (mb: number) =>
  mb < 1024 ? `${Math.round(mb)}\u00a0MB` : `${(mb / 1024).toFixed(1)}\u00a0GB`;

/** Where a failure is fixed: the view to open, if any. */
export type FixView = "keys" | "models" | undefined;

/** API failures as plain sentences, with the view that fixes them. */
export function describeError(error: unknown): { text: string; fix: FixView; stopped: boolean } {
  if (error instanceof OpenAI.APIError) {
    const message = (error.error as { message?: string } | undefined)?.message ?? error.message;
    switch (error.status) {
      case 401:
        return {
          text: "This API key was refused: it is missing, unknown or revoked. Pick or create one under Keys & usage.",
          fix: "keys",
          stopped: false,
        };
      case 403:
        return {
          text: "The account's balance cannot cover this request. Add credit under Keys & usage.",
          fix: "keys",
          stopped: false,
        };
      case 429:
        return {
          text: `Too many requests or tokens for this key this minute. Try again in ${error.headers?.get("retry-after") ?? "a few"} seconds, or raise its limits under Keys & usage.`,
          fix: "keys",
          stopped: false,
        };
      case 503:
        return { text: `The model cannot run right now: ${message}`, fix: "models", stopped: false };
      default:
        return {
          text: `The API answered ${error.status ?? "with an error"}: ${message}`,
          fix: undefined,
          stopped: false,
        };
    }
  }
  if (error instanceof Error && error.name === "AbortError") return { text: "Stopped.", fix: undefined, stopped: true };
  return { text: error instanceof Error ? error.message : String(error), fix: undefined, stopped: false };
}
