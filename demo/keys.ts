/**
 * The keys and usage view: the account (kept across reloads), the key Chat uses (a picker over
 * the keys this browser made), key creation with how to use it, limits, revocation, credit, the
 * rate-limit window, the ledger (filtered, exported as shown) and the usage chart.
 */
import type { ApiKeyInfo, InferenceHandle, LedgerEntry } from "../src/index.js";
import { renderUsageChart } from "./chart.js";
import { button, cell, describeError, element, feedback, labelCells, usd } from "./dom.js";
import { dropKept, keepKey, keepOnly, keptKeys, storageKeys, type DemoState } from "./state.js";

/**
 * The account and key Chat uses. The account is remembered; a revoked or lost chat key is replaced
 * by another this browser keeps for the same account, or a new key on it, never a new account.
 */
export async function chatKey(
  state: DemoState,
  handle: InferenceHandle,
): Promise<{ key: string; note: string | null }> {
  const keys = await handle.admin.listKeys();
  keepOnly(new Set(keys.filter((key) => key.status === "active").map((key) => key.id)));
  const remembered = localStorage.getItem(storageKeys.account);
  const account = remembered ? await handle.admin.getAccount(remembered) : undefined;
  if (!account) {
    const created = await handle.admin.createAccount({ name: "Demo", creditUsd: 1 });
    localStorage.setItem(storageKeys.account, created.id);
    state.accountId = created.id;
    return { key: await newChatKey(handle, created.id), note: null };
  }
  state.accountId = account.id;
  const active = new Set(
    keys.filter((key) => key.status === "active" && key.accountId === account.id).map((key) => key.id),
  );
  const chosen = localStorage.getItem(storageKeys.chatKey);
  const usable = keptKeys().filter((kept) => active.has(kept.id));
  const current = usable.find((kept) => kept.id === chosen) ?? usable[0];
  if (current) {
    localStorage.setItem(storageKeys.chatKey, current.id);
    return {
      key: current.key,
      note: current.id === chosen ? null : `The chat key was revoked; Chat now uses ${current.prefix}.`,
    };
  }
  return {
    key: await newChatKey(handle, account.id),
    note: "The chat key was revoked; Chat now uses a new key on the same account.",
  };
}

/**
 * The requests per minute of the demo's own chat key. Its views read `/v1/model/info` once per
 * model on every refresh (a reload, a key or engine change), so the default would run out after a
 * few reloads; a key created under Keys & usage keeps the default.
 */
const chatKeyRpm = 600;

async function newChatKey(handle: InferenceHandle, accountId: string): Promise<string> {
  const created = await handle.admin.createKey({ accountId, name: "demo chat", rpm: chatKeyRpm });
  keepKey({ id: created.id, key: created.key, prefix: created.prefix });
  localStorage.setItem(storageKeys.chatKey, created.id);
  return created.key;
}

/**
 * How to call the API with a key, as the OpenAI dashboard shows: the openai SDK and fetch, and
 * curl while `npm start`'s relay takes requests to this tab (curl cannot reach a service worker).
 */
function snippets(baseURL: string, key: string, model: string, relayed: boolean): Record<string, string> {
  const body = JSON.stringify({ model, messages: [{ role: "user", content: "Hello!" }] });
  return {
    "openai SDK": `import OpenAI from "openai";\n\nconst client = new OpenAI({ baseURL: "${baseURL}", apiKey: "${key}", dangerouslyAllowBrowser: true });\nconst reply = await client.chat.completions.create({ model: "${model}", messages: [{ role: "user", content: "Hello!" }] });\nconsole.log(reply.choices[0].message.content);`,
    fetch: `const response = await fetch("${baseURL}/chat/completions", {\n  method: "POST",\n  headers: { "content-type": "application/json", authorization: "Bearer ${key}" },\n  body: JSON.stringify(${body}),\n});\nconsole.log((await response.json()).choices[0].message.content);`,
    ...(relayed
      ? {
          curl: `curl ${baseURL}/chat/completions \\\n  -H "Content-Type: application/json" \\\n  -H "Authorization: Bearer ${key}" \\\n  -d '${body.replace(/'/g, "'\\''")}'`,
        }
      : {}),
  };
}

/** Who can reach the API, as things stand: the relay comes and goes with `npm start`'s server. */
function reachText(relayed: boolean): string {
  return relayed
    ? "The API lives in this browser's service worker. This app's pages reach it, and curl and servers reach it through the demo server's relay while this tab is open."
    : "The API lives in this browser's service worker: this app's pages reach it. curl and servers cannot from here: only the demo's own server (npm start) relays them to an open tab.";
}

function csv(rows: readonly LedgerEntry[], keyName: (id: string | undefined) => string): string {
  const quote = (value: string) => (/[",\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value);
  const lines = rows.map((entry) =>
    [
      new Date(entry.createdAt).toISOString(),
      entry.kind,
      entry.status,
      keyName(entry.keyId),
      entry.model ?? "",
      String(entry.promptTokens ?? ""),
      String(entry.completionTokens ?? ""),
      (((entry.kind === "credit" ? 1 : -1) * entry.amountNanoUsd) / 1e9).toFixed(9),
      entry.requestId ?? "",
    ]
      .map(quote)
      .join(","),
  );
  return ["time,kind,status,key,model,prompt_tokens,completion_tokens,usd,request_id", ...lines].join("\n") + "\n";
}

interface KeysOptions {
  useKey: (key: string) => void;
  modelId: () => string;
}

export function setupKeys(state: DemoState, options: KeysOptions): { render(): Promise<void> } {
  const view = new KeysView(state, options);
  view.bind();
  return { render: () => view.render() };
}

/** A number input for one of a key's limits. */
function limitInput(value: number, label: string): HTMLInputElement {
  const input = Object.assign(document.createElement("input"), {
    type: "number",
    min: "1",
    step: "1",
    value: String(value),
  });
  input.setAttribute("aria-label", label);
  return input;
}

/** The limits cell of an active key: its rpm and tpm, editable and saved together. */
function limitsEditor(handle: InferenceHandle, key: ApiKeyInfo): HTMLTableCellElement {
  const limits = document.createElement("td");
  const note = Object.assign(document.createElement("span"), { className: "control-feedback" });
  note.setAttribute("role", "status");
  const rpm = limitInput(key.rpm, `Requests per minute for ${key.prefix}`);
  const tpm = limitInput(key.tpm, `Tokens per minute for ${key.prefix}`);
  const save = button("Save", () => {
    const chosen = { rpm: Number(rpm.value), tpm: Number(tpm.value) };
    if (!Number.isInteger(chosen.rpm) || !Number.isInteger(chosen.tpm) || chosen.rpm < 1 || chosen.tpm < 1) {
      feedback(note, "Limits are whole numbers of at least 1.", true);
      return;
    }
    void handle.admin.setLimits(key.id, chosen).then(
      () => feedback(note, "Saved."),
      (error: unknown) => feedback(note, describeError(error).text, true),
    );
  });
  const row = Object.assign(document.createElement("div"), { className: "limits" });
  row.append(rpm, "rpm", tpm, "tpm", save);
  limits.append(row, note);
  return limits;
}

class KeysView {
  readonly #state: DemoState;
  readonly #options: KeysOptions;
  #shown: LedgerEntry[] = [];
  #chart: ReturnType<typeof renderUsageChart>;
  #keyNames = new Map<string, string>();

  constructor(state: DemoState, options: KeysOptions) {
    this.#state = state;
    this.#options = options;
  }

  readonly #keyName = (id: string | undefined) => (id ? (this.#keyNames.get(id) ?? id) : "");

  #renderRate(): void {
    const rate = this.#state.rate;
    if (!rate) return;
    // The reset header says when the window starts again: an ISO 8601 timestamp (or, configured so, a duration).
    const reset = rate["reset-requests"] ?? "";
    const when = Number.isNaN(Date.parse(reset)) ? `in ${reset || "?"}` : `at ${new Date(reset).toLocaleTimeString()}`;
    element("rate-state").textContent =
      `Requests: ${rate["remaining-requests"]} of ${rate["limit-requests"]} left, window resets ${when}. ` +
      `Tokens: ${rate["remaining-tokens"]} of ${rate["limit-tokens"]} left. (As of the last response, ${new Date().toLocaleTimeString()}.)`;
  }

  #keyRow(handle: InferenceHandle, key: ApiKeyInfo, chat: string | null): HTMLTableRowElement {
    const row = document.createElement("tr");
    const actions = document.createElement("td");
    let limits: HTMLTableCellElement;
    if (key.status === "active") {
      limits = limitsEditor(handle, key);
      const revoke = () =>
        void handle.admin
          .revokeKey(key.id)
          .then(() => dropKept(key.id))
          .then(() => this.render());
      actions.append(button("Revoke", revoke));
      const kept = keptKeys().find((candidate) => candidate.id === key.id);
      if (kept && key.id !== chat) actions.append(button("Use for chat", () => void this.#useForChat(kept.id)));
    } else limits = cell(`${key.rpm} rpm, ${key.tpm} tpm`);
    const label = `${key.prefix}${key.id === chat ? " (chat)" : ""}`;
    const lastUsed = key.lastUsedAt ? new Date(key.lastUsedAt).toLocaleString() : "never";
    row.append(cell(label), cell(key.name ?? ""), cell(key.status), limits, cell(lastUsed), actions);
    return row;
  }

  async #useForChat(id: string): Promise<void> {
    const kept = keptKeys().find((candidate) => candidate.id === id);
    if (!kept) return;
    localStorage.setItem(storageKeys.chatKey, kept.id);
    this.#options.useKey(kept.key);
    feedback(element("keys-feedback"), `Chat now uses ${kept.prefix.replace(/\.+$|…$/, "")}…`);
    await this.render();
  }

  async render(): Promise<void> {
    const { handle, accountId } = this.#state;
    if (!handle || !accountId) return;
    const account = await handle.admin.getAccount(accountId);
    element("balance").textContent = account
      ? `Balance ${usd(account.balanceNanoUsd)}, of which ${usd(account.reservedNanoUsd)} is reserved by requests in progress.`
      : "No account.";
    this.#renderRate();
    const keys = await handle.admin.listKeys(accountId);
    this.#keyNames = new Map(keys.map((key) => [key.id, key.name ? `${key.name} (${key.prefix})` : key.prefix]));
    const chat = localStorage.getItem(storageKeys.chatKey);
    element<HTMLTableElement>("keys-table").tBodies[0]!.replaceChildren(
      ...keys.map((key) => this.#keyRow(handle, key, chat)),
    );
    labelCells(element("keys-table"));
    await this.#renderLedger(handle, accountId, keys);
  }

  /** The ledger under the chosen filters (kept when still offered), its first 200 rows, and the chart. */
  async #renderLedger(handle: InferenceHandle, accountId: string, keys: ApiKeyInfo[]): Promise<void> {
    const filterKey = element<HTMLSelectElement>("filter-key");
    const filterModel = element<HTMLSelectElement>("filter-model");
    const chosenKey = filterKey.value;
    const chosenModel = filterModel.value;
    const ledger = await handle.admin.ledger({ accountId });
    filterKey.replaceChildren(
      new Option("All keys", ""),
      ...keys.map((key) => new Option(this.#keyName(key.id), key.id)),
    );
    filterKey.value = keys.some((key) => key.id === chosenKey) ? chosenKey : "";
    const models = [...new Set(ledger.flatMap((entry) => (entry.model ? [entry.model] : [])))];
    filterModel.replaceChildren(new Option("All models", ""), ...models.map((model) => new Option(model, model)));
    filterModel.value = models.includes(chosenModel) ? chosenModel : "";
    this.#shown = ledger.filter(
      (entry) =>
        (!filterKey.value || entry.keyId === filterKey.value) &&
        (!filterModel.value || entry.model === filterModel.value),
    );
    element<HTMLTableElement>("ledger-table").tBodies[0]!.replaceChildren(
      ...this.#shown.slice(0, 200).map((entry) => this.#ledgerRow(entry)),
    );
    labelCells(element("ledger-table"));
    this.#chart = renderUsageChart(element("chart"), ledger, this.#chart);
  }

  #ledgerRow(entry: LedgerEntry): HTMLTableRowElement {
    const row = document.createElement("tr");
    const tokens = entry.kind === "charge" ? `${entry.promptTokens ?? 0} + ${entry.completionTokens ?? 0}` : "";
    row.append(
      cell(new Date(entry.createdAt).toLocaleString()),
      cell(entry.kind),
      cell(this.#keyName(entry.keyId)),
      cell(entry.model ?? ""),
      cell(tokens, "number"),
      cell(`${entry.kind === "credit" ? "+" : "−"}${usd(entry.amountNanoUsd)}`, "number"),
      cell(entry.status),
    );
    return row;
  }

  async #createKey(event: SubmitEvent): Promise<void> {
    event.preventDefault();
    const note = element("key-form-feedback");
    if (!this.#state.handle || !this.#state.accountId) return;
    const name = element<HTMLInputElement>("key-name").value.trim();
    try {
      const created = await this.#state.handle.admin.createKey({
        accountId: this.#state.accountId,
        ...(name ? { name } : {}),
        rpm: Number(element<HTMLInputElement>("key-rpm").value),
        tpm: Number(element<HTMLInputElement>("key-tpm").value),
      });
      keepKey({ id: created.id, key: created.key, prefix: created.prefix });
      feedback(note, "");
      this.#showNewKey(created.key);
      await this.#useForChat(created.id);
    } catch (error) {
      feedback(note, describeError(error).text, true);
    }
  }

  #showNewKey(key: string): void {
    element("new-key-value").textContent = key;
    element("new-key-base").textContent = this.#state.handle?.baseURL ?? "";
    this.#renderSnippets();
    element("new-key").hidden = false;
    element("new-key-done").focus();
  }

  /** The snippets for the key on show; again when the relay comes or goes, as curl's works only with it. */
  #renderSnippets(): void {
    const key = element("new-key-value").textContent ?? "";
    if (!key) return;
    const relayed = this.#state.relay?.connected ?? false;
    element("new-key-reach").textContent = reachText(relayed);
    const shown = snippets(this.#state.handle?.baseURL ?? "", key, this.#options.modelId(), relayed);
    element("new-key-snippets").replaceChildren(
      ...Object.entries(shown).map(([title, code]) => snippetBlock(title, code)),
    );
  }

  async #credit(event: SubmitEvent): Promise<void> {
    event.preventDefault();
    const note = element("credit-feedback");
    if (!this.#state.handle || !this.#state.accountId) return;
    const amount = Number(element<HTMLInputElement>("credit-amount").value);
    try {
      await this.#state.handle.admin.credit(this.#state.accountId, amount);
      feedback(note, `Added $${amount.toFixed(2)}.`);
      await this.render();
    } catch (error) {
      feedback(note, describeError(error).text, true);
    }
  }

  #exportCsv(): void {
    const link = Object.assign(document.createElement("a"), {
      href: URL.createObjectURL(new Blob([csv(this.#shown, this.#keyName)], { type: "text/csv" })),
      download: "ledger.csv",
    });
    link.click();
    URL.revokeObjectURL(link.href);
  }

  bind(): void {
    // The chart is drawn at its figure's width: a new width (a turned phone, a resized window) redraws it.
    new ResizeObserver(() => {
      const width = element("chart").clientWidth;
      if (this.#chart && width > 0 && Math.abs(this.#chart.width - width) > 8)
        this.#chart.setSize({ width: Math.max(280, width), height: this.#chart.height });
    }).observe(element("chart"));
    this.#state.changed.addEventListener("rate", () => this.#renderRate());
    this.#state.changed.addEventListener("relay", () => this.#renderSnippets());
    element<HTMLFormElement>("key-form").addEventListener("submit", (event) => void this.#createKey(event));
    element("copy-key").addEventListener(
      "click",
      () => void copy(element("new-key-value").textContent ?? "", element("copy-key-feedback")),
    );
    element("new-key-done").addEventListener("click", () => {
      element("new-key").hidden = true;
      element("new-key-value").textContent = "";
      element("new-key-snippets").replaceChildren();
    });
    element<HTMLFormElement>("credit-form").addEventListener("submit", (event) => void this.#credit(event));
    for (const id of ["filter-key", "filter-model"]) element(id).addEventListener("change", () => void this.render());
    element("export").addEventListener("click", () => this.#exportCsv());
  }
}

/** One snippet: its title, its code, and a button that copies it. */
function snippetBlock(title: string, code: string): HTMLDivElement {
  const block = document.createElement("div");
  block.className = "snippet";
  const pre = document.createElement("pre");
  pre.append(Object.assign(document.createElement("code"), { textContent: code }));
  const note = Object.assign(document.createElement("span"), { className: "control-feedback" });
  block.append(
    Object.assign(document.createElement("h3"), { textContent: title }),
    pre,
    button(`Copy ${title}`, () => void copy(code, note)),
    note,
  );
  return block;
}

async function copy(text: string, note: HTMLElement): Promise<void> {
  await navigator.clipboard.writeText(text).then(
    () => feedback(note, "Copied."),
    () => feedback(note, "The browser did not allow copying; select the text and copy it by hand.", true),
  );
}
