/**
 * The chat demo. Chat goes only through the official openai SDK, with `baseURL` set to the
 * worker's /v1, the way any app would; keys and usage go through the admin API on the handle.
 */
import OpenAI from "openai";
import { startInference, type InferenceHandle, type LedgerEntry, type LoadProgress, type StartInferenceOptions } from "../src/index.js";
import { cpuModelId, demoModels } from "./catalogue.js";
import { renderUsageChart } from "./chart.js";

type Engine = "auto" | "webllm" | "deterministic";
const engineNames: Record<Engine, string> = { auto: "automatic", webllm: "WebLLM", deterministic: "deterministic" };
type Message = { role: "user" | "assistant"; content: string };
interface ModelRow {
  id: string;
  context_window: number;
  pricing: { input_per_1m_tokens: number; output_per_1m_tokens: number };
  build: { model_id: string; estimated_memory_mb: number } | null;
  builds: string[];
  engine: string;
  engine_reason: string;
  downloaded: boolean;
  loaded: boolean;
  runnable: { ok: boolean; reason: string | null };
}

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing from the page`);
  return found as T;
}

const status = element<HTMLParagraphElement>("status");
const banner = element<HTMLDivElement>("banner");
const engineSelect = element<HTMLSelectElement>("engine");
const modelSelect = element<HTMLSelectElement>("model");
const conversation = element<HTMLOListElement>("conversation");
const prompt = element<HTMLTextAreaElement>("prompt");
const sendButton = element<HTMLButtonElement>("send");
const stopButton = element<HTMLButtonElement>("stop");

const storageKeys = { key: "webgpu-inference-demo-key", keyId: "webgpu-inference-demo-key-id", conversation: "webgpu-inference-demo-conversation" };
const query = new URLSearchParams(location.search);

const app: {
  handle?: InferenceHandle;
  client?: OpenAI;
  accountId?: string;
  running?: AbortController;
  rate?: Record<string, string>;
  history: Message[];
  models: ModelRow[];
  // Broadcast progress and a load's own reply travel on different channels, so a progress report
  // can arrive after the load has failed; it must not overwrite the failure on the status line.
  failedDownloads: Set<string>;
} = { history: [], models: [], failedDownloads: new Set() };

// ------------------------------------------------------------------ small helpers

function say(text: string, isError = false): void {
  status.textContent = text;
  status.classList.toggle("error", isError);
}

function showBanner(text: string, action?: { label: string; run: () => void }): void {
  banner.replaceChildren(text);
  if (action) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "secondary";
    button.textContent = action.label;
    button.addEventListener("click", action.run);
    banner.append(button);
  }
  banner.hidden = false;
}

function cell(text: string, className?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

/** Narrow screens show each row as a card; each cell then names its column. */
function labelCells(table: HTMLTableElement): void {
  const headings = [...table.tHead!.rows[0]!.cells].map((heading) => heading.textContent ?? "");
  for (const row of table.tBodies[0]!.rows) [...row.cells].forEach((td, index) => td.setAttribute("data-label", headings[index] ?? ""));
}

function button(label: string, run: () => void, secondary = true): HTMLButtonElement {
  const made = document.createElement("button");
  made.type = "button";
  made.textContent = label;
  if (secondary) made.className = "secondary";
  made.addEventListener("click", run);
  return made;
}

/** Dollars to the nano-dollar, without trailing zeros past the cents. */
const usd = (nano: number) => `$${(nano / 1e9).toFixed(9).replace(/(\.\d\d\d*?)0+$/, "$1")}`;
const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(bytes > 100 * 1024 * 1024 ? 0 : 1)} MB`;

/** API failures as plain sentences. */
function describeError(error: unknown): string {
  if (error instanceof OpenAI.APIError) {
    const message = (error.error as { message?: string } | undefined)?.message ?? error.message;
    switch (error.status) {
      case 401:
        return "This API key was refused: it is missing, unknown or revoked. Create or pick one under Keys & usage.";
      case 403:
        return "The account's balance cannot cover this request. Add credit under Keys & usage.";
      case 429:
        return `Too many requests or tokens for this key this minute. Try again in ${error.headers?.get("retry-after") ?? "a few"} seconds, or raise its limits under Keys & usage.`;
      case 503:
        return `The model cannot run right now: ${message}`;
      default:
        return `The API answered ${error.status ?? "with an error"}: ${message}`;
    }
  }
  if (error instanceof Error && error.name === "AbortError") return "Stopped.";
  return error instanceof Error ? error.message : String(error);
}

function rememberRate(headers: Headers): void {
  const names = ["limit-requests", "remaining-requests", "reset-requests", "limit-tokens", "remaining-tokens", "reset-tokens"];
  if (!headers.get("x-ratelimit-limit-requests")) return;
  app.rate = Object.fromEntries(names.map((name) => [name, headers.get(`x-ratelimit-${name}`) ?? ""]));
  renderRate();
}

// ------------------------------------------------------------------ navigation

const views = ["chat", "models", "keys"] as const;
function show(view: (typeof views)[number]): void {
  for (const name of views) {
    element(`tab-${name}`).setAttribute("aria-selected", String(name === view));
    element(`view-${name}`).hidden = name !== view;
  }
  if (view === "models") void renderModels();
  if (view === "keys") void renderKeys();
}
for (const name of views) element(`tab-${name}`).addEventListener("click", () => show(name));

// ------------------------------------------------------------------ start-up

/** The demo's account and key: a key's secret is shown once, so the demo keeps the one it uses. */
async function chatKey(handle: InferenceHandle): Promise<string> {
  const stored = localStorage.getItem(storageKeys.key);
  const keyId = localStorage.getItem(storageKeys.keyId);
  const keys = await handle.admin.listKeys();
  const current = keys.find((key) => key.id === keyId && key.status === "active");
  if (stored && current) {
    app.accountId = current.accountId;
    return stored;
  }
  const account = await handle.admin.createAccount({ name: "Demo", creditUsd: 1 });
  const created = await handle.admin.createKey({ accountId: account.id, name: "demo" });
  useKey(created.key, created.id);
  app.accountId = account.id;
  return created.key;
}

function useKey(key: string, keyId: string): void {
  localStorage.setItem(storageKeys.key, key);
  localStorage.setItem(storageKeys.keyId, keyId);
  if (app.handle) app.client = new OpenAI({ baseURL: app.handle.baseURL, apiKey: key, dangerouslyAllowBrowser: true, maxRetries: 0 });
}

/**
 * `?config=<url>` points the demo at a JSON file of `startInference` options: a deployment's own
 * models (added to the demo's, or overriding them by id) and artifact URLs, or another worker build.
 */
async function deploymentOptions(): Promise<StartInferenceOptions> {
  const url = query.get("config");
  if (!url) return { models: demoModels };
  // The last copy is kept, so the demo starts offline as it did online.
  const kept = `webgpu-inference-demo-config:${url}`;
  const response = await fetch(new URL(url, location.href)).catch((error: unknown) => {
    if (localStorage.getItem(kept) !== null) return null;
    throw new Error(`The demo configuration ${url} could not be loaded, and no copy is kept from an earlier visit: ${(error as Error).message}.`);
  });
  if (response && !response.ok) throw new Error(`The demo configuration ${url} could not be loaded (HTTP ${response.status}).`);
  if (response) localStorage.setItem(kept, await response.text());
  const options = JSON.parse(localStorage.getItem(kept)!) as StartInferenceOptions;
  // The deployment's entries come after the demo's, so they override them field by field.
  return { ...options, models: [...demoModels, ...(options.models ?? [])] };
}

async function start(engine: Engine): Promise<void> {
  say(`Starting the ${engineNames[engine]} engine…`);
  const delay = Number(query.get("delay"));
  // This page hosts llama.cpp for the worker (it cannot run in a service worker): the CPU path
  // for devices without a usable GPU, and for models that have only GGUF builds.
  const wllama = engine === "deterministic" ? undefined : await import("@wllama/wllama/esm/index.js");
  const handle = await startInference({
    serviceWorkerUrl: new URL("./sw.js", location.href).pathname,
    scope: "./",
    ...(await deploymentOptions()),
    engine,
    ...(wllama ? { pageEngine: { wllama } } : {}),
    ...(delay > 0 ? { tokenDelayMs: delay } : {}),
  });
  app.handle = handle;
  handle.workbox.addEventListener("controlling", (event) => {
    if (event.isUpdate) showBanner("A new version of this app has taken over.", { label: "Reload", run: () => location.reload() });
  });
  handle.workbox.addEventListener("waiting", () => showBanner("An update is available.", { label: "Update", run: () => handle.workbox.messageSkipWaiting() }));
  const key = await chatKey(handle);
  app.client = new OpenAI({ baseURL: handle.baseURL, apiKey: key, dangerouslyAllowBrowser: true, maxRetries: 0 });
  await loadModels();
  say(engine === "deterministic" ? "Ready." : "Ready. Download a model under Models, or send a message: the first one downloads it.");
}

async function loadModels(): Promise<void> {
  if (!app.client || !app.handle) return;
  const { data: list, response } = await app.client.models.list().withResponse();
  rememberRate(response.headers);
  const key = localStorage.getItem(storageKeys.key) ?? "";
  app.models = await Promise.all(
    list.data.map(async (model) => {
      const info = await fetch(`${app.handle!.baseURL}/model/info?model=${encodeURIComponent(model.id)}`, { headers: { authorization: `Bearer ${key}` } });
      return (await info.json()) as ModelRow;
    }),
  );
  const previous = modelSelect.value;
  modelSelect.replaceChildren(
    ...app.models.map((model) => {
      const option = new Option(model.runnable.ok ? model.id : `${model.id} (cannot run here)`, model.id);
      option.disabled = !model.runnable.ok;
      return option;
    }),
  );
  // A model the GPU runs first; else the CPU one.
  const runnable = app.models.filter((model) => model.runnable.ok);
  const first = (runnable.find((model) => model.engine === "webllm") ?? runnable.find((model) => model.id === cpuModelId) ?? runnable[0])?.id;
  modelSelect.value = runnable.some((model) => model.id === previous) ? previous : (first ?? "");
  explainDevice();
}

/** Under `auto`, says plainly when no model runs on the GPU here, and why. */
function explainDevice(): void {
  if (engineSelect.value !== "auto" || app.models.length === 0 || app.models.some((model) => model.engine === "webllm")) return;
  const reason = "gpu" in navigator ? app.models.find((model) => model.builds.length > 0)?.engine_reason.match(/web-llm: ([^;]+)/)?.[1] : "this browser has no WebGPU";
  const cpu = app.models.some((model) => model.engine === "llamacpp" && model.runnable.ok);
  const browsers = "For the GPU, use Chrome or Edge 113 or later on desktop, or Chrome 121 or later on Android; on Linux, enable chrome://flags/#enable-unsafe-webgpu.";
  showBanner(
    `No model runs on a GPU here${reason ? ` (${reason})` : ""}. ` +
      (cpu ? "Models run on the CPU with llama.cpp instead: slower, but real. " : "No model in this catalogue runs on the CPU either: choose the deterministic engine to try the app. ") +
      browsers,
  );
}

// ------------------------------------------------------------------ chat

function bubble(role: Message["role"], text: string): { body: HTMLSpanElement; stats: HTMLSpanElement } {
  const item = document.createElement("li");
  item.className = role;
  const body = document.createElement("span");
  body.className = "body";
  body.textContent = text;
  const stats = document.createElement("span");
  stats.className = "stats";
  item.append(body, stats);
  conversation.append(item);
  item.scrollIntoView({ block: "end" });
  return { body, stats };
}

function saveConversation(): void {
  localStorage.setItem(storageKeys.conversation, JSON.stringify(app.history));
}

function restoreConversation(): void {
  try {
    app.history = JSON.parse(localStorage.getItem(storageKeys.conversation) ?? "[]") as Message[];
  } catch {
    app.history = [];
  }
  for (const message of app.history) bubble(message.role, message.content);
}

async function send(text: string): Promise<void> {
  if (!app.client) return;
  app.history.push({ role: "user", content: text });
  saveConversation();
  bubble("user", text);
  const reply = bubble("assistant", "");
  const model = modelSelect.value;
  app.failedDownloads.delete(model);
  const controller = new AbortController();
  app.running = controller;
  sendButton.disabled = true;
  stopButton.disabled = false;
  const started = performance.now();
  let firstToken: number | undefined;
  let content = "";
  let usage: OpenAI.CompletionUsage | undefined;
  try {
    const jsonMode = element<HTMLInputElement>("json-mode").checked;
    const { data: stream, response } = await app.client.chat.completions
      .create(
        {
          model,
          messages: app.history,
          stream: true,
          stream_options: { include_usage: true },
          temperature: Number(element<HTMLInputElement>("temperature").value),
          max_tokens: Number(element<HTMLInputElement>("max-tokens").value),
          ...(jsonMode ? { response_format: { type: "json_object" as const } } : {}),
        },
        { signal: controller.signal },
      )
      .withResponse();
    rememberRate(response.headers);
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content;
      if (delta) {
        firstToken ??= performance.now();
        content += delta;
        reply.body.textContent = content;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    // The SDK ends an aborted stream quietly; the person pressed Stop.
    if (controller.signal.aborted) throw new DOMException("Stopped.", "AbortError");
    const seconds = (performance.now() - (firstToken ?? started)) / 1000;
    const price = app.models.find((candidate) => candidate.id === model)?.pricing;
    const cost = usage && price ? (usage.prompt_tokens * price.input_per_1m_tokens + usage.completion_tokens * price.output_per_1m_tokens) / 1_000_000 : undefined;
    reply.stats.textContent = [
      usage ? `${usage.prompt_tokens} + ${usage.completion_tokens} tokens` : "",
      firstToken ? `TTFT ${Math.round(firstToken - started)} ms` : "",
      usage && seconds > 0 ? `${(usage.completion_tokens / seconds).toFixed(1)} tok/s` : "",
      cost !== undefined ? `$${cost.toFixed(9)}` : "",
    ]
      .filter(Boolean)
      .join(" · ");
    say("Ready.");
  } catch (error) {
    reply.stats.textContent = describeError(error);
    reply.stats.classList.toggle("error", !(error instanceof Error && error.name === "AbortError"));
    say(describeError(error), !(error instanceof Error && error.name === "AbortError"));
  } finally {
    if (content) {
      app.history.push({ role: "assistant", content });
      saveConversation();
    }
    app.running = undefined;
    sendButton.disabled = false;
    stopButton.disabled = true;
  }
}

element<HTMLFormElement>("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = prompt.value.trim();
  if (!text || app.running) return;
  prompt.value = "";
  void send(text);
});
prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    element<HTMLFormElement>("composer").requestSubmit();
  }
});
stopButton.addEventListener("click", () => app.running?.abort());
element("clear").addEventListener("click", () => {
  app.history = [];
  saveConversation();
  conversation.replaceChildren();
});
engineSelect.addEventListener("change", () => {
  void start(engineSelect.value as Engine).catch((error: unknown) => say(describeError(error), true));
});

// ------------------------------------------------------------------ models

function progressText(progress: LoadProgress): string {
  const percent = Math.round(progress.progress * 100);
  const left = progress.elapsedSeconds && progress.progress > 0 && progress.progress < 1 ? Math.round((progress.elapsedSeconds * (1 - progress.progress)) / progress.progress) : undefined;
  return [progress.loadedBytes ? megabytes(progress.loadedBytes) : "", `${percent}%`, left !== undefined ? `about ${left} s left` : ""].filter(Boolean).join(" · ");
}

async function download(model: ModelRow, slot: HTMLTableCellElement): Promise<void> {
  const bar = document.createElement("progress");
  bar.max = 1;
  bar.value = 0;
  bar.setAttribute("aria-label", `Downloading ${model.id}`);
  const text = document.createElement("span");
  text.className = "progress-text";
  slot.replaceChildren(bar, text);
  app.failedDownloads.delete(model.id);
  try {
    await app.handle!.loadModel(model.id, (progress) => {
      bar.value = progress.progress;
      text.textContent = progressText(progress);
    });
    await loadModels();
    await renderModels();
  } catch (error) {
    text.textContent = `Download failed: ${describeError(error)}`;
    text.classList.add("error");
    app.failedDownloads.add(model.id);
    say(`Downloading ${model.id} failed; what was fetched is kept, and Retry resumes from there.`, true);
    slot.append(button("Retry (resumes where it stopped)", () => void download(model, slot)));
  }
}

function engineLabel(model: ModelRow): string {
  if (model.engine === "webllm") return " on the GPU (WebLLM)";
  if (model.engine === "llamacpp") return " on the CPU (llama.cpp)";
  return "";
}

async function renderModels(): Promise<void> {
  const estimate = await navigator.storage?.estimate?.();
  element("storage-usage").textContent = estimate?.quota ? `Using ${megabytes(estimate.usage ?? 0)} of ${megabytes(estimate.quota)} this browser allows.` : "This browser does not report storage use.";
  const body = element<HTMLTableElement>("models-table").tBodies[0]!;
  body.replaceChildren(
    ...app.models.map((model) => {
      const row = document.createElement("tr");
      row.append(
        cell(model.build ? `${model.id}\n${model.build.model_id}` : model.id),
        cell(model.context_window.toLocaleString("en-US"), "number"),
        cell(`${model.pricing.input_per_1m_tokens} / ${model.pricing.output_per_1m_tokens}`, "number"),
        cell(model.build ? `${(model.build.estimated_memory_mb / 1024).toFixed(1)} GB` : "built in", "number"),
        cell(model.runnable.ok ? `Runs here${engineLabel(model)}${model.loaded ? " · loaded" : model.downloaded ? " · downloaded" : ""}` : `Cannot run here: ${model.runnable.reason}`),
      );
      const slot = document.createElement("td");
      if (!model.build) slot.textContent = "Nothing to download";
      else if (!model.runnable.ok) slot.textContent = "—";
      else if (model.downloaded) {
        slot.append(
          button("Delete", () => {
            void app.handle!.deleteModel(model.id).then(loadModels).then(renderModels, (error: unknown) => say(describeError(error), true));
          }),
        );
      } else slot.append(button("Download", () => void download(model, slot), false));
      row.append(slot);
      return row;
    }),
  );
  labelCells(element("models-table"));
}

element("persist").addEventListener("click", async () => {
  const kept = await navigator.storage?.persist?.();
  say(kept ? "Downloaded models will be kept when space runs low." : "The browser did not grant persistent storage; it may evict models when space runs low.");
});

// ------------------------------------------------------------------ keys and usage

function renderRate(): void {
  const rate = app.rate;
  if (!rate) return;
  const at = (iso: string | undefined) => (iso ? new Date(iso).toLocaleTimeString() : "");
  element("rate-state").textContent =
    `Requests: ${rate["remaining-requests"]} of ${rate["limit-requests"]} left, window resets at ${at(rate["reset-requests"])}. ` +
    `Tokens: ${rate["remaining-tokens"]} of ${rate["limit-tokens"]} left.`;
}

async function renderKeys(): Promise<void> {
  const handle = app.handle;
  if (!handle || !app.accountId) return;
  const account = await handle.admin.getAccount(app.accountId);
  element("balance").textContent = account ? `Balance ${usd(account.balanceNanoUsd)}, of which ${usd(account.reservedNanoUsd)} is reserved by requests in progress.` : "No account.";
  renderRate();
  const keys = await handle.admin.listKeys(app.accountId);
  const current = localStorage.getItem(storageKeys.keyId);
  element<HTMLTableElement>("keys-table").tBodies[0]!.replaceChildren(
    ...keys.map((key) => {
      const row = document.createElement("tr");
      const limits = document.createElement("td");
      const rpm = Object.assign(document.createElement("input"), { type: "number", min: "1", value: String(key.rpm) });
      rpm.setAttribute("aria-label", `Requests per minute for ${key.prefix}`);
      const tpm = Object.assign(document.createElement("input"), { type: "number", min: "1", value: String(key.tpm) });
      tpm.setAttribute("aria-label", `Tokens per minute for ${key.prefix}`);
      limits.append(rpm, " rpm ", tpm, " tpm ");
      limits.append(button("Save", () => void handle.admin.setLimits(key.id, { rpm: Number(rpm.value), tpm: Number(tpm.value) }).then(renderKeys, (error: unknown) => say(describeError(error), true))));
      const actions = document.createElement("td");
      if (key.status === "active") actions.append(button("Revoke", () => void handle.admin.revokeKey(key.id).then(renderKeys)));
      row.append(cell(`${key.prefix}${key.id === current ? " (chat)" : ""}`), cell(key.name ?? ""), cell(key.status), limits, cell(key.lastUsedAt ? new Date(key.lastUsedAt).toLocaleString() : "never"), actions);
      return row;
    }),
  );
  labelCells(element("keys-table"));
  const filterKey = element<HTMLSelectElement>("filter-key");
  const filterModel = element<HTMLSelectElement>("filter-model");
  const chosenKey = filterKey.value;
  const chosenModel = filterModel.value;
  const ledger = await handle.admin.ledger({ accountId: app.accountId });
  filterKey.replaceChildren(new Option("All keys", ""), ...keys.map((key) => new Option(key.prefix, key.id)));
  filterKey.value = chosenKey;
  const models = [...new Set(ledger.flatMap((entry) => (entry.model ? [entry.model] : [])))];
  filterModel.replaceChildren(new Option("All models", ""), ...models.map((model) => new Option(model, model)));
  filterModel.value = models.includes(chosenModel) ? chosenModel : "";
  const shown = ledger.filter((entry) => (!filterKey.value || entry.keyId === filterKey.value) && (!filterModel.value || entry.model === filterModel.value));
  element<HTMLTableElement>("ledger-table").tBodies[0]!.replaceChildren(...shown.slice(0, 200).map(ledgerRow));
  labelCells(element("ledger-table"));
  renderUsageChart(element("chart"), ledger);
}

function ledgerRow(entry: LedgerEntry): HTMLTableRowElement {
  const row = document.createElement("tr");
  const tokens = entry.kind === "charge" ? `${entry.promptTokens ?? 0} + ${entry.completionTokens ?? 0}` : "";
  row.append(
    cell(new Date(entry.createdAt).toLocaleString()),
    cell(entry.kind),
    cell(entry.model ?? ""),
    cell(tokens, "number"),
    cell(`${entry.kind === "credit" ? "+" : "−"}${usd(entry.amountNanoUsd)}`, "number"),
    cell(entry.status),
  );
  return row;
}

element<HTMLFormElement>("key-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!app.handle || !app.accountId) return;
  const name = element<HTMLInputElement>("key-name").value.trim();
  const created = await app.handle.admin.createKey({
    accountId: app.accountId,
    ...(name ? { name } : {}),
    rpm: Number(element<HTMLInputElement>("key-rpm").value),
    tpm: Number(element<HTMLInputElement>("key-tpm").value),
  });
  useKey(created.key, created.id);
  element("new-key-value").textContent = created.key;
  element("new-key").hidden = false;
  say(`Created ${created.prefix}; the chat now uses it.`);
  await renderKeys();
});
element("copy-key").addEventListener("click", async () => {
  await navigator.clipboard.writeText(element("new-key-value").textContent ?? "").then(
    () => say("Copied."),
    () => say("The browser did not allow copying; select the key and copy it by hand.", true),
  );
});
element<HTMLFormElement>("credit-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!app.handle || !app.accountId) return;
  await app.handle.admin.credit(app.accountId, Number(element<HTMLInputElement>("credit-amount").value));
  await renderKeys();
});
for (const id of ["filter-key", "filter-model"]) element(id).addEventListener("change", () => void renderKeys());
element("export").addEventListener("click", async () => {
  if (!app.handle || !app.accountId) return;
  const csv = await app.handle.admin.exportLedger("csv", { accountId: app.accountId });
  const link = Object.assign(document.createElement("a"), { href: URL.createObjectURL(new Blob([csv], { type: "text/csv" })), download: "ledger.csv" });
  link.click();
  URL.revokeObjectURL(link.href);
});

// ------------------------------------------------------------------ go

const requested = query.get("engine");
engineSelect.value = requested === "deterministic" || requested === "webllm" || requested === "auto" ? requested : "auto";
restoreConversation();
void start(engineSelect.value as Engine).catch((error: unknown) => say(describeError(error), true));
navigator.serviceWorker?.addEventListener("message", (event: MessageEvent<{ type?: string; modelId?: string; progress?: LoadProgress }>) => {
  const { type, modelId, progress } = event.data ?? {};
  if (type === "webgpu-inference:progress" && progress && modelId && !app.failedDownloads.has(modelId)) say(`Loading ${modelId}: ${progressText(progress)} — ${progress.text}`);
});
