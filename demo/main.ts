/**
 * The chat demo. It talks to the library only through the official openai SDK, with `baseURL`
 * set to the worker's /v1, the way any app would.
 */
import OpenAI from "openai";
import { startInference, type InferenceHandle } from "../src/index.js";

type Message = { role: "user" | "assistant"; content: string };

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing from the page`);
  return found as T;
}

const engineSelect = element<HTMLSelectElement>("engine");
const modelSelect = element<HTMLSelectElement>("model");
const temperatureInput = element<HTMLInputElement>("temperature");
const maxTokensInput = element<HTMLInputElement>("max-tokens");
const status = element<HTMLParagraphElement>("status");
const conversation = element<HTMLOListElement>("conversation");
const composer = element<HTMLFormElement>("composer");
const prompt = element<HTMLTextAreaElement>("prompt");
const sendButton = element<HTMLButtonElement>("send");
const stopButton = element<HTMLButtonElement>("stop");

const history: Message[] = [];
const prices = new Map<string, { input: number; output: number }>();
let client: OpenAI | undefined;
let running: AbortController | undefined;

function say(text: string, isError = false): void {
  status.textContent = text;
  status.classList.toggle("error", isError);
}

/** API failures as plain sentences. */
function describeError(error: unknown): string {
  if (error instanceof OpenAI.APIError) {
    const message = (error.error as { message?: string } | undefined)?.message ?? error.message;
    return `The API answered ${error.status ?? "with an error"}: ${message}`;
  }
  if (error instanceof Error && error.name === "AbortError") return "Stopped.";
  return error instanceof Error ? error.message : String(error);
}

/**
 * The demo's own account and key. A key's secret is shown once, so the demo keeps it, the way
 * a person would keep a key they copied; it makes a new one if the stored key is gone.
 */
async function demoKey(admin: InferenceHandle["admin"]): Promise<string> {
  const stored = localStorage.getItem("webgpu-inference-demo-key");
  const keyId = localStorage.getItem("webgpu-inference-demo-key-id");
  const keys = await admin.listKeys();
  if (stored && keys.some((key) => key.id === keyId && key.status === "active")) return stored;
  const account = await admin.createAccount({ name: "Demo", creditUsd: 1 });
  const created = await admin.createKey({ accountId: account.id, name: "demo" });
  localStorage.setItem("webgpu-inference-demo-key", created.key);
  localStorage.setItem("webgpu-inference-demo-key-id", created.id);
  return created.key;
}

async function start(engine: "webllm" | "deterministic"): Promise<void> {
  say(`Starting the ${engine === "webllm" ? "WebLLM" : "deterministic"} engine…`);
  const handle = await startInference({ engine });
  client = new OpenAI({ baseURL: handle.baseURL, apiKey: await demoKey(handle.admin), dangerouslyAllowBrowser: true, maxRetries: 0 });
  const models = await client.models.list();
  const previous = modelSelect.value;
  modelSelect.replaceChildren(...models.data.map((model) => new Option(model.id, model.id)));
  if (previous) modelSelect.value = previous;
  await Promise.all(
    models.data.map(async (model) => {
      const info = (await fetch(`${handle.baseURL}/model/info?model=${encodeURIComponent(model.id)}`, { headers: { authorization: `Bearer ${client?.apiKey}` } }).then((response) =>
        response.json(),
      )) as {
        pricing: { input_per_1m_tokens: number; output_per_1m_tokens: number };
        runnable: { ok: boolean; reason: string | null };
      };
      prices.set(model.id, { input: info.pricing.input_per_1m_tokens, output: info.pricing.output_per_1m_tokens });
      const option = [...modelSelect.options].find((candidate) => candidate.value === model.id);
      if (option && !info.runnable.ok) option.textContent = `${model.id} (cannot run here: ${info.runnable.reason})`;
    }),
  );
  say(engine === "webllm" ? "Ready. The first message downloads and compiles the model; that can take minutes." : "Ready.");
}

function bubble(role: Message["role"], text: string): { item: HTMLLIElement; body: HTMLSpanElement; stats: HTMLSpanElement } {
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
  return { item, body, stats };
}

async function send(text: string): Promise<void> {
  if (!client) return;
  history.push({ role: "user", content: text });
  bubble("user", text);
  const reply = bubble("assistant", "");
  const model = modelSelect.value;
  running = new AbortController();
  sendButton.disabled = true;
  stopButton.disabled = false;
  const started = performance.now();
  let firstToken: number | undefined;
  let content = "";
  let usage: OpenAI.CompletionUsage | undefined;
  try {
    const stream = await client.chat.completions.create(
      {
        model,
        messages: history,
        stream: true,
        stream_options: { include_usage: true },
        temperature: Number(temperatureInput.value),
        max_tokens: Number(maxTokensInput.value),
      },
      { signal: running.signal },
    );
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content;
      if (delta) {
        firstToken ??= performance.now();
        content += delta;
        reply.body.textContent = content;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    history.push({ role: "assistant", content });
    const seconds = (performance.now() - (firstToken ?? started)) / 1000;
    const price = prices.get(model);
    const cost = usage && price ? (usage.prompt_tokens * price.input + usage.completion_tokens * price.output) / 1_000_000 : undefined;
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
    if (content) history.push({ role: "assistant", content });
    reply.stats.textContent = describeError(error);
    reply.stats.classList.add("error");
    say(describeError(error), !(error instanceof Error && error.name === "AbortError"));
  } finally {
    running = undefined;
    sendButton.disabled = false;
    stopButton.disabled = true;
  }
}

composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const text = prompt.value.trim();
  if (!text || running) return;
  prompt.value = "";
  void send(text);
});
prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    composer.requestSubmit();
  }
});
stopButton.addEventListener("click", () => running?.abort());
engineSelect.addEventListener("change", () => {
  void start(engineSelect.value as "webllm" | "deterministic").catch((error: unknown) => say(describeError(error), true));
});
navigator.serviceWorker?.addEventListener("message", (event: MessageEvent<{ type?: string; modelId?: string; progress?: { progress: number; text: string } }>) => {
  if (event.data?.type === "webgpu-inference:progress" && event.data.progress) {
    say(`Loading ${event.data.modelId}: ${Math.round(event.data.progress.progress * 100)}% — ${event.data.progress.text}`);
  }
});

const requested = new URLSearchParams(location.search).get("engine");
engineSelect.value = requested === "deterministic" || requested === "webllm" ? requested : "gpu" in navigator ? "webllm" : "deterministic";
void start(engineSelect.value as "webllm" | "deterministic").catch((error: unknown) => say(describeError(error), true));
