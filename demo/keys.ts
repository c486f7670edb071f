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

async function newChatKey(handle: InferenceHandle, accountId: string): Promise<string> {
  const created = await handle.admin.createKey({ accountId, name: "demo chat" });
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

export function setupKeys(
  state: DemoState,
  options: { useKey: (key: string) => void; modelId: () => string },
): { render(): Promise<void> } {
  let shown: LedgerEntry[] = [];
  let chart: ReturnType<typeof renderUsageChart>;
  // The chart is drawn at its figure's width: a new width (a turned phone, a resized window) redraws it.
  new ResizeObserver(() => {
    const width = element("chart").clientWidth;
    if (chart && width > 0 && Math.abs(chart.width - width) > 8)
      chart.setSize({ width: Math.max(280, width), height: chart.height });
  }).observe(element("chart"));
  let keyNames = new Map<string, string>();
  const keyName = (id: string | undefined) => (id ? (keyNames.get(id) ?? id) : "");

  function renderRate(): void {
    const rate = state.rate;
    if (!rate) return;
    const at = (iso: string | undefined) => (iso ? new Date(iso).toLocaleTimeString() : "");
    element("rate-state").textContent =
      `Requests: ${rate["remaining-requests"]} of ${rate["limit-requests"]} left, window resets at ${at(rate["reset-requests"])}. ` +
      `Tokens: ${rate["remaining-tokens"]} of ${rate["limit-tokens"]} left. (As of the last response, ${new Date().toLocaleTimeString()}.)`;
  }
  state.changed.addEventListener("rate", renderRate);

  function keyRow(handle: InferenceHandle, key: ApiKeyInfo, chat: string | null): HTMLTableRowElement {
    const row = document.createElement("tr");
    const limits = document.createElement("td");
    const actions = document.createElement("td");
    const note = Object.assign(document.createElement("span"), { className: "control-feedback" });
    note.setAttribute("role", "status");
    if (key.status === "active") {
      const rpm = Object.assign(document.createElement("input"), {
        type: "number",
        min: "1",
        step: "1",
        value: String(key.rpm),
      });
      rpm.setAttribute("aria-label", `Requests per minute for ${key.prefix}`);
      const tpm = Object.assign(document.createElement("input"), {
        type: "number",
        min: "1",
        step: "1",
        value: String(key.tpm),
      });
      tpm.setAttribute("aria-label", `Tokens per minute for ${key.prefix}`);
      const save = button("Save", () => {
        const limitsChosen = { rpm: Number(rpm.value), tpm: Number(tpm.value) };
        if (
          !Number.isInteger(limitsChosen.rpm) ||
          !Number.isInteger(limitsChosen.tpm) ||
          limitsChosen.rpm < 1 ||
          limitsChosen.tpm < 1
        ) {
          feedback(note, "Limits are whole numbers of at least 1.", true);
          return;
        }
        void handle.admin.setLimits(key.id, limitsChosen).then(
          () => feedback(note, "Saved."),
          (error: unknown) => feedback(note, describeError(error).text, true),
        );
      });
      const row = Object.assign(document.createElement("div"), { className: "limits" });
      row.append(rpm, "rpm", tpm, "tpm", save);
      limits.append(row, note);
      actions.append(
        button(
          "Revoke",
          () =>
            void handle.admin
              .revokeKey(key.id)
              .then(() => dropKept(key.id))
              .then(render),
        ),
      );
      const kept = keptKeys().find((candidate) => candidate.id === key.id);
      if (kept && key.id !== chat) actions.append(button("Use for chat", () => void useForChat(kept.id)));
    } else limits.append(`${key.rpm} rpm, ${key.tpm} tpm`);
    const label = `${key.prefix}${key.id === chat ? " (chat)" : ""}`;
    row.append(
      cell(label),
      cell(key.name ?? ""),
      cell(key.status),
      limits,
      cell(key.lastUsedAt ? new Date(key.lastUsedAt).toLocaleString() : "never"),
      actions,
    );
    return row;
  }

  async function useForChat(id: string): Promise<void> {
    const kept = keptKeys().find((candidate) => candidate.id === id);
    if (!kept) return;
    localStorage.setItem(storageKeys.chatKey, kept.id);
    options.useKey(kept.key);
    feedback(element("keys-feedback"), `Chat now uses ${kept.prefix.replace(/\.+$|…$/, "")}…`);
    await render();
  }

  async function render(): Promise<void> {
    const handle = state.handle;
    if (!handle || !state.accountId) return;
    const account = await handle.admin.getAccount(state.accountId);
    element("balance").textContent = account
      ? `Balance ${usd(account.balanceNanoUsd)}, of which ${usd(account.reservedNanoUsd)} is reserved by requests in progress.`
      : "No account.";
    renderRate();
    const keys = await handle.admin.listKeys(state.accountId);
    keyNames = new Map(keys.map((key) => [key.id, key.name ? `${key.name} (${key.prefix})` : key.prefix]));
    const chat = localStorage.getItem(storageKeys.chatKey);
    element<HTMLTableElement>("keys-table").tBodies[0]!.replaceChildren(
      ...keys.map((key) => keyRow(handle, key, chat)),
    );
    labelCells(element("keys-table"));
    const filterKey = element<HTMLSelectElement>("filter-key");
    const filterModel = element<HTMLSelectElement>("filter-model");
    const chosenKey = filterKey.value;
    const chosenModel = filterModel.value;
    const ledger = await handle.admin.ledger({ accountId: state.accountId });
    filterKey.replaceChildren(new Option("All keys", ""), ...keys.map((key) => new Option(keyName(key.id), key.id)));
    filterKey.value = keys.some((key) => key.id === chosenKey) ? chosenKey : "";
    const models = [...new Set(ledger.flatMap((entry) => (entry.model ? [entry.model] : [])))];
    filterModel.replaceChildren(new Option("All models", ""), ...models.map((model) => new Option(model, model)));
    filterModel.value = models.includes(chosenModel) ? chosenModel : "";
    shown = ledger.filter(
      (entry) =>
        (!filterKey.value || entry.keyId === filterKey.value) &&
        (!filterModel.value || entry.model === filterModel.value),
    );
    element<HTMLTableElement>("ledger-table").tBodies[0]!.replaceChildren(...shown.slice(0, 200).map(ledgerRow));
    labelCells(element("ledger-table"));
    chart = renderUsageChart(element("chart"), ledger, chart);
  }

  function ledgerRow(entry: LedgerEntry): HTMLTableRowElement {
    const row = document.createElement("tr");
    const tokens = entry.kind === "charge" ? `${entry.promptTokens ?? 0} + ${entry.completionTokens ?? 0}` : "";
    row.append(
      cell(new Date(entry.createdAt).toLocaleString()),
      cell(entry.kind),
      cell(keyName(entry.keyId)),
      cell(entry.model ?? ""),
      cell(tokens, "number"),
      cell(`${entry.kind === "credit" ? "+" : "−"}${usd(entry.amountNanoUsd)}`, "number"),
      cell(entry.status),
    );
    return row;
  }

  element<HTMLFormElement>("key-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const note = element("key-form-feedback");
    if (!state.handle || !state.accountId) return;
    const name = element<HTMLInputElement>("key-name").value.trim();
    try {
      const created = await state.handle.admin.createKey({
        accountId: state.accountId,
        ...(name ? { name } : {}),
        rpm: Number(element<HTMLInputElement>("key-rpm").value),
        tpm: Number(element<HTMLInputElement>("key-tpm").value),
      });
      keepKey({ id: created.id, key: created.key, prefix: created.prefix });
      feedback(note, "");
      showNewKey(created.key);
      await useForChat(created.id);
    } catch (error) {
      feedback(note, describeError(error).text, true);
    }
  });

  function showNewKey(key: string): void {
    element("new-key-value").textContent = key;
    element("new-key-base").textContent = state.handle?.baseURL ?? "";
    renderSnippets();
    element("new-key").hidden = false;
    element("new-key-done").focus();
  }

  /** The snippets for the key on show; again when the relay comes or goes, as curl's works only with it. */
  function renderSnippets(): void {
    const key = element("new-key-value").textContent ?? "";
    if (!key) return;
    const relayed = state.relay?.connected ?? false;
    element("new-key-reach").textContent = reachText(relayed);
    element("new-key-snippets").replaceChildren(
      ...Object.entries(snippets(state.handle?.baseURL ?? "", key, options.modelId(), relayed)).map(([title, code]) => {
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
      }),
    );
  }
  state.changed.addEventListener("relay", renderSnippets);

  async function copy(text: string, note: HTMLElement): Promise<void> {
    await navigator.clipboard.writeText(text).then(
      () => feedback(note, "Copied."),
      () => feedback(note, "The browser did not allow copying; select the text and copy it by hand.", true),
    );
  }

  element("copy-key").addEventListener(
    "click",
    () => void copy(element("new-key-value").textContent ?? "", element("copy-key-feedback")),
  );
  element("new-key-done").addEventListener("click", () => {
    element("new-key").hidden = true;
    element("new-key-value").textContent = "";
    element("new-key-snippets").replaceChildren();
  });
  element<HTMLFormElement>("credit-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const note = element("credit-feedback");
    if (!state.handle || !state.accountId) return;
    const amount = Number(element<HTMLInputElement>("credit-amount").value);
    try {
      await state.handle.admin.credit(state.accountId, amount);
      feedback(note, `Added $${amount.toFixed(2)}.`);
      await render();
    } catch (error) {
      feedback(note, describeError(error).text, true);
    }
  });
  for (const id of ["filter-key", "filter-model"]) element(id).addEventListener("change", () => void render());
  element("export").addEventListener("click", () => {
    const link = Object.assign(document.createElement("a"), {
      href: URL.createObjectURL(new Blob([csv(shown, keyName)], { type: "text/csv" })),
      download: "ledger.csv",
    });
    link.click();
    URL.revokeObjectURL(link.href);
  });
  return { render };
}
