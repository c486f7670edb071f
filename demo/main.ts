/**
 * The chat demo's entry: starts the engine, wires the views (chat, models, keys and usage, documents) to the
 * shared state, and owns the tabs, the banner and the start-up status. Chat goes only through the
 * official openai SDK, with `baseURL` set to the worker's /v1, the way any app would; keys and
 * usage go through the admin API on the handle.
 */
import OpenAI from "openai";
import { startInference, type LoadProgress, type StartInferenceOptions } from "../src/index.js";
import { demoModels } from "./catalogue.js";
import { setupDocuments } from "./documents.js";
import { setupChat } from "./chat.js";
import { button, describeError, element } from "./dom.js";
import { chatKey, setupKeys } from "./keys.js";
import { preferredModel, progressText, readModels, setupModels } from "./models.js";
import { connectRelay } from "./relay.js";
import { announce, createState, type Engine, type ModelRow } from "./state.js";

const query = new URLSearchParams(location.search);
const engineNames: Record<Engine, string> = { auto: "automatic", webllm: "WebLLM", deterministic: "deterministic" };
const requested = query.get("engine");
const state = createState(
  requested === "deterministic" || requested === "webllm" || requested === "auto" ? requested : "auto",
);

const status = element<HTMLParagraphElement>("status");
const banner = element<HTMLDivElement>("banner");
const engineSelect = element<HTMLSelectElement>("engine");
const modelSelect = element<HTMLSelectElement>("model");

function say(text: string, isError = false): void {
  status.textContent = text;
  status.classList.toggle("error", isError);
}

function showBanner(text: string, action?: { label: string; run: () => void }): void {
  banner.replaceChildren(text);
  if (action) banner.append(button(action.label, action.run));
  banner.hidden = false;
}

// ------------------------------------------------------------------ views and tabs

const views = ["chat", "models", "keys", "documents"] as const;
type View = (typeof views)[number];
const chat = setupChat(state, { show: (view) => show(view, true), modelId: () => modelSelect.value });
const models = setupModels(state, () => refreshModels());
const keys = setupKeys(state, { useKey, modelId: () => modelSelect.value });
const documents = setupDocuments(state);

/** Tabs as the ARIA pattern has them: roving tabindex, arrow keys, Home and End. */
function show(view: View, focus = false): void {
  for (const name of views) {
    const tab = element(`tab-${name}`);
    tab.setAttribute("aria-selected", String(name === view));
    tab.tabIndex = name === view ? 0 : -1;
    element(`view-${name}`).hidden = name !== view;
  }
  if (focus) element(`tab-${view}`).focus();
  if (view === "models") void models.render();
  if (view === "keys") void keys.render();
  if (view === "documents") void documents.render().catch((error: unknown) => say(describeError(error).text, true));
}
views.forEach((name, index) => {
  const tab = element(`tab-${name}`);
  tab.addEventListener("click", () => show(name));
  tab.addEventListener("keydown", (event) => {
    const next = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: views.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    show(views[(next + views.length) % views.length]!, true);
  });
});

// ------------------------------------------------------------------ start-up

function useKey(key: string): void {
  if (state.handle)
    state.client = new OpenAI({
      baseURL: state.handle.baseURL,
      apiKey: key,
      dangerouslyAllowBrowser: true,
      maxRetries: 0,
    });
  void refreshModels();
}

/**
 * `?config=<url>` points the demo at a JSON file of `startInference` options: a deployment's own
 * models (added to the demo's, or overriding them by id) and artifact URLs, or another worker build.
 */
async function deploymentOptions(): Promise<StartInferenceOptions> {
  const url = query.get("config");
  if (!url) return { models: demoModels };
  // A configuration routes every prompt (upstreams, model files): configuration is code, so a
  // link may name this site's own files only, never another's (nor a data: URL).
  if (new URL(url, location.href).origin !== location.origin) {
    throw new Error(
      `The demo takes ?config= from this site only, and ${url} is elsewhere: a configuration decides where every prompt goes, so a link must not choose it. Put the file on this site and link to its path.`,
    );
  }
  // The last copy is kept, so the demo starts offline as it did online.
  const kept = `webgpu-inference-demo-config:${url}`;
  const response = await fetch(new URL(url, location.href)).catch((error: unknown) => {
    if (localStorage.getItem(kept) !== null) return null;
    throw new Error(
      `The demo configuration ${url} could not be loaded, and no copy is kept from an earlier visit: ${(error as Error).message}.`,
    );
  });
  // fetch follows redirects, so the file read is where one ended: it must be this site's too. (A
  // response made by a worker has no URL; this page's worker only passes on or caches fetches.)
  if (response?.url && new URL(response.url).origin !== location.origin)
    throw new Error(
      `The demo takes ?config= from this site only, and ${url} redirected to ${response.url}, which is elsewhere: a configuration decides where every prompt goes. Link to the file's own path on this site.`,
    );
  if (response && !response.ok)
    throw new Error(`The demo configuration ${url} could not be loaded (HTTP ${response.status}).`);
  if (response) localStorage.setItem(kept, await response.text());
  const options = JSON.parse(localStorage.getItem(kept)!) as StartInferenceOptions;
  // The deployment's entries come after the demo's, so they override them field by field.
  return { ...options, models: [...demoModels, ...(options.models ?? [])] };
}

async function start(engine: Engine): Promise<void> {
  chat.setReady(false);
  state.engine = engine;
  say(`Starting the ${engineNames[engine]} engine…`);
  const delay = Number(query.get("delay"));
  // This page hosts llama.cpp for the worker (it cannot run in a service worker): the CPU path
  // for devices without a usable GPU, and for models that have only GGUF builds.
  const handle = await startInference({
    serviceWorkerUrl: new URL("./sw.js", location.href).pathname,
    scope: "./",
    ...(await deploymentOptions()),
    engine,
    ...(engine === "deterministic" ? {} : { pageEngine: { llamacpp: true } }),
    ...(delay > 0 ? { tokenDelayMs: delay } : {}),
  });
  state.handle = handle;
  state.relay ??= connectRelay(new URL(handle.baseUrl).pathname, () => announce(state, "relay"));
  handle.workbox.addEventListener("controlling", (event) => {
    if (event.isUpdate)
      showBanner("A new version of this app has taken over.", { label: "Reload", run: () => location.reload() });
  });
  handle.workbox.addEventListener("waiting", () =>
    showBanner("An update is available.", { label: "Update", run: () => handle.workbox.messageSkipWaiting() }),
  );
  const { key, note } = await chatKey(state, handle);
  state.client = new OpenAI({ baseURL: handle.baseURL, apiKey: key, dangerouslyAllowBrowser: true, maxRetries: 0 });
  await refreshModels();
  chat.listConversations();
  chat.setReady(true);
  const ready =
    engine === "deterministic"
      ? "Ready. Replies are simulated by the deterministic engine."
      : navigator.onLine
        ? "Ready. Download a model under Models, or send a message: the first one downloads it."
        : "Ready, offline: the models already downloaded answer.";
  say(note ? `${note} ${ready}` : ready);
}

async function refreshModels(): Promise<void> {
  if (!state.client || !state.handle) return;
  const key = state.client.apiKey ?? "";
  await readModels(state, state.client, key);
  const previous = modelSelect.value;
  const chatModels = state.models.filter((model) => model.kind === "chat");
  modelSelect.replaceChildren(
    ...chatModels.map((model) => {
      const option = new Option(model.runnable.ok ? model.id : `${model.id} (cannot run here)`, model.id);
      option.disabled = !model.runnable.ok;
      return option;
    }),
  );
  modelSelect.value = preferredModel(chatModels, previous);
  explainDevice(chatModels);
}

/** Under `auto`, says plainly when no chat model runs on the GPU here, and why. */
function explainDevice(models: readonly ModelRow[]): void {
  if (state.engine !== "auto" || models.length === 0 || models.some((model) => model.engine === "webllm")) return;
  const reason =
    "gpu" in navigator
      ? models.find((model) => model.builds.length > 0)?.engine_reason.match(/web-llm: ([^;]+)/)?.[1]
      : "this browser has no WebGPU";
  const cpu = models.some((model) => model.engine === "llamacpp" && model.runnable.ok);
  const browsers =
    "For the GPU, use Chrome or Edge 113 or later on desktop, or Chrome 121 or later on Android; on Linux, enable chrome://flags/#enable-unsafe-webgpu.";
  showBanner(
    `No model runs on a GPU here${reason ? ` (${reason})` : ""}. ` +
      (cpu
        ? "Models run on the CPU with llama.cpp instead: slower, but real. "
        : "No model in this catalogue runs on the CPU either: choose the deterministic engine to try the app. ") +
      browsers,
  );
}

function showConnectivity(): void {
  element("offline").hidden = navigator.onLine;
}

// ------------------------------------------------------------------ go

engineSelect.value = state.engine;
engineSelect.addEventListener("change", () => {
  void start(engineSelect.value as Engine).catch((error: unknown) => say(describeError(error).text, true));
});
addEventListener("online", showConnectivity);
addEventListener("offline", showConnectivity);
showConnectivity();
show("chat");
chat.restore();
void start(state.engine).catch((error: unknown) => say(describeError(error).text, true));
// A model's loading progress is stale once a response has come back.
state.changed.addEventListener("rate", () => {
  if (status.textContent?.startsWith("Loading ")) say("Ready.");
});
navigator.serviceWorker?.addEventListener(
  "message",
  (event: MessageEvent<{ type?: string; modelId?: string; progress?: LoadProgress }>) => {
    const { type, modelId, progress } = event.data ?? {};
    if (type === "webgpu-inference:progress" && progress && modelId && !state.failedDownloads.has(modelId))
      say(`Loading ${modelId}: ${progressText(progress)} — ${progress.text}`);
  },
);
