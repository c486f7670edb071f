/**
 * The chat view: a conversation through the official openai SDK, streamed, with per-reply facts
 * (the model, tokens, time to first token, speed, cost, a "cut at max tokens" mark, and a
 * "simulated" label for the deterministic engine) that survive a reload. A failed turn shows an
 * error block with Retry and is never sent again as context. With "Answer from my documents" a
 * turn goes through the Responses API with `file_search` over the Documents view's store, and the
 * answer lists the passages it cites, each opening to its text. Every answered turn is kept in the
 * API's own conversation (./conversations.ts), so a person returns to an earlier chat.
 */
import DOMPurify from "dompurify";
import { marked } from "marked";
import type OpenAI from "openai";
import { forget, keptConversations, readConversation, recordTurn } from "./conversations.js";
import { knownStore } from "./documents.js";
import { button, describeError, element, feedback, type FixView } from "./dom.js";
import { announce, storageKeys, type DemoState, type Message, type Source } from "./state.js";

const conversation = () => element<HTMLOListElement>("conversation");
const prompt = () => element<HTMLTextAreaElement>("prompt");

/**
 * What a reply may hold once rendered: text structure, code, tables and links, nothing that loads
 * by itself or acts without a click. No images (a remote one leaks data as it loads: a markdown
 * image is shown as a link), forms, styles, frames, `id` or `name` (DOM clobbering), event
 * handlers; links http(s) or mailto only, opening apart from this page.
 */
const replyMarkup = {
  ALLOWED_TAGS: [
    "p",
    "br",
    "hr",
    "strong",
    "em",
    "del",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
  ],
  ALLOWED_ATTR: ["href", "title", "start", "align", "class"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
};

let sanitiser: typeof DOMPurify | undefined;

/** DOMPurify with the link rule, made once, on first use. */
function replySanitiser(): typeof DOMPurify {
  if (sanitiser) return sanitiser;
  sanitiser = DOMPurify(window);
  sanitiser.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName !== "A") return;
    node.setAttribute("rel", "noopener noreferrer");
    node.setAttribute("target", "_blank");
  });
  return sanitiser;
}

/** Markdown of a reply, its images written as links to them. */
function replyHtml(content: string): string {
  const renderer = new marked.Renderer();
  const escaped = (text: string) => text.replace(/[&<>"]/g, (character) => `&#${character.charCodeAt(0)};`);
  renderer.image = ({ href, text }) => `<a href="${escaped(href)}">${escaped(text || "image")}</a>`;
  return marked.parse(content, { async: false, gfm: true, breaks: true, renderer });
}

/** Markdown to sanitised HTML (replies are model output: never trusted as markup); JSON pretty-printed. */
function renderReply(body: HTMLElement, content: string, json: boolean): void {
  if (json) {
    try {
      const pre = document.createElement("pre");
      pre.append(
        Object.assign(document.createElement("code"), { textContent: JSON.stringify(JSON.parse(content), null, 2) }),
      );
      body.replaceChildren(pre);
      return;
    } catch {
      // Not whole JSON (a reply cut short): shown as text below.
    }
  }
  body.innerHTML = replySanitiser().sanitize(replyHtml(content), replyMarkup);
}

function item(role: Message["role"] | "error"): HTMLLIElement {
  const li = document.createElement("li");
  li.className = role;
  conversation().append(li);
  return li;
}

function userBubble(message: Message): HTMLLIElement {
  const li = item("user");
  li.append(Object.assign(document.createElement("span"), { className: "body", textContent: message.content }));
  return li;
}

function assistantBubble(): { li: HTMLLIElement; body: HTMLDivElement; stats: HTMLSpanElement } {
  const li = item("assistant");
  const body = Object.assign(document.createElement("div"), { className: "body" });
  const stats = Object.assign(document.createElement("span"), { className: "stats" });
  li.append(body, stats);
  return { li, body, stats };
}

/** The passages an answer cites, under it: each a disclosure that opens to the passage's text (as text). */
function showSources(li: HTMLElement, sources: readonly Source[] | undefined): void {
  if (!sources?.length) return;
  const list = Object.assign(document.createElement("div"), { className: "sources" });
  list.append(Object.assign(document.createElement("p"), { textContent: "Sources" }));
  sources.forEach((source, index) => {
    const details = document.createElement("details");
    const summary = Object.assign(document.createElement("summary"), {
      textContent: `[${index + 1}] ${source.filename}`,
    });
    details.append(summary, Object.assign(document.createElement("blockquote"), { textContent: source.text }));
    list.append(details);
  });
  li.insertBefore(list, li.querySelector(".stats"));
}

/** What an answer cites: each file its citations name, once, with the best passage found in it. */
function citedSources(response: OpenAI.Responses.Response): Source[] {
  const results = response.output.flatMap((item) => (item.type === "file_search_call" ? (item.results ?? []) : []));
  const cited = new Map<string, Source>();
  for (const item of response.output) {
    if (item.type !== "message") continue;
    for (const part of item.content)
      for (const annotation of part.type === "output_text" ? part.annotations : []) {
        if (annotation.type !== "file_citation" || cited.has(annotation.file_id)) continue;
        const passage = results.find((result) => result.file_id === annotation.file_id);
        cited.set(annotation.file_id, { filename: annotation.filename, text: passage?.text ?? "" });
      }
  }
  return [...cited.values()];
}

function showDetails(stats: HTMLElement, details: NonNullable<Message["details"]>): void {
  stats.replaceChildren();
  if (details.simulated)
    stats.append(
      Object.assign(document.createElement("span"), {
        className: "tag",
        textContent: "Simulated reply (deterministic engine)",
      }),
    );
  if (details.cut)
    stats.append(
      Object.assign(document.createElement("span"), { className: "tag warn", textContent: "Cut at max tokens" }),
    );
  stats.append(`${details.model}${details.stats ? ` · ${details.stats}` : ""}`);
}

export interface ChatView {
  restore(): void;
  setReady(ready: boolean): void;
  /** Lists this account's kept chats (once the account is known). */
  listConversations(): void;
}

interface ChatOptions {
  show: (view: "keys" | "models") => void;
  modelId: () => string;
}

/** A reply as it streams in: its bubble, its text so far, and what the stream said about it. */
interface Streaming {
  reply: ReturnType<typeof assistantBubble>;
  model: string;
  jsonMode: boolean;
  started: number;
  firstToken?: number;
  content: string;
  usage?: OpenAI.CompletionUsage;
  finish?: string | null;
  simulated: boolean;
  sources?: Source[];
}

/** A turn as the API is sent it. */
interface TurnRequest {
  model: string;
  messages: { role: Message["role"]; content: string }[];
  temperature: number;
  maxTokens: number;
}

export function setupChat(state: DemoState, options: ChatOptions): ChatView {
  const chat = new Chat(state, options);
  chat.bind();
  return {
    restore: () => chat.restore(),
    setReady: (value) => chat.setReady(value),
    listConversations: () => chat.listConversations(),
  };
}

class Chat {
  readonly #state: DemoState;
  readonly #options: ChatOptions;
  readonly #sendButton = element<HTMLButtonElement>("send");
  readonly #stopButton = element<HTMLButtonElement>("stop");
  readonly #settingsFeedback = element("settings-feedback");
  readonly #announcer = element("reply-announcer");
  readonly #conversations = element<HTMLSelectElement>("conversations");
  #ready = false;
  /** The API's conversation the chat on screen is kept in; none before its first answered turn. */
  #conversationId: string | undefined = localStorage.getItem(storageKeys.conversationId) ?? undefined;

  constructor(state: DemoState, options: ChatOptions) {
    this.#state = state;
    this.#options = options;
  }

  #save(): void {
    localStorage.setItem(storageKeys.conversation, JSON.stringify(this.#state.history));
    if (this.#conversationId) localStorage.setItem(storageKeys.conversationId, this.#conversationId);
    else localStorage.removeItem(storageKeys.conversationId);
  }

  /** The chat picker: this chat first, then the account's other kept chats. */
  listConversations(): void {
    const kept = keptConversations(this.#state);
    const current = kept.find((conversation) => conversation.id === this.#conversationId);
    this.#conversations.replaceChildren(
      new Option(current ? current.title : "This chat (new)", this.#conversationId ?? ""),
      ...kept
        .filter((conversation) => conversation !== current)
        .map((conversation) => new Option(conversation.title, conversation.id)),
    );
    this.#conversations.value = this.#conversationId ?? "";
  }

  /** Shows an earlier chat, read back from its conversation. */
  async #open(id: string): Promise<void> {
    const client = this.#state.client;
    if (!client || this.#state.running || id === (this.#conversationId ?? "")) return;
    try {
      const messages = await readConversation(client, id);
      if (!messages) {
        forget(this.#state, id);
        feedback(this.#settingsFeedback, "That chat is no longer kept by the API.", true);
      } else {
        this.#conversationId = id;
        this.#state.history = messages;
        this.#save();
        conversation().replaceChildren();
        this.#show(messages);
        feedback(this.#settingsFeedback, "");
      }
    } catch (error) {
      feedback(this.#settingsFeedback, describeError(error).text, true);
    }
    this.listConversations();
  }

  /** Keeps an answered turn in the chat's conversation; a failure to keep it is said, and the chat goes on. */
  async #record(user: string, assistant: string): Promise<void> {
    const client = this.#state.client;
    if (!client) return;
    try {
      const first = this.#conversationId === undefined;
      this.#conversationId = await recordTurn(client, this.#state, this.#conversationId, { user, assistant });
      this.#save();
      if (first) this.listConversations();
    } catch (error) {
      feedback(
        this.#settingsFeedback,
        `This turn was not kept in the chat's history: ${describeError(error).text}`,
        true,
      );
    }
  }

  #errorBlock(message: Message, text: string, fix: FixView): void {
    const li = item("error");
    li.setAttribute("role", "alert");
    li.append(Object.assign(document.createElement("p"), { textContent: `Not answered: ${text}` }));
    const actions = document.createElement("div");
    actions.className = "actions";
    actions.append(
      button("Retry", () => {
        this.#state.history = this.#state.history.filter((entry) => entry !== message);
        this.#save();
        li.previousElementSibling?.remove();
        li.remove();
        void this.#send(message.content);
      }),
    );
    if (fix)
      actions.append(button(fix === "keys" ? "Open Keys & usage" : "Open Models", () => this.#options.show(fix)));
    li.append(actions);
  }

  /** The settings as the API takes them, or a sentence naming what is out of range. */
  #settings(): { temperature: number; maxTokens: number } | string {
    const temperatureInput = element<HTMLInputElement>("temperature");
    const maxTokensInput = element<HTMLInputElement>("max-tokens");
    const temperature = temperatureInput.value.trim() === "" ? NaN : Number(temperatureInput.value);
    const maxTokens = Number(maxTokensInput.value);
    const window = this.#state.models.find((model) => model.id === this.#options.modelId())?.context_window ?? 4_096;
    temperatureInput.setAttribute("aria-invalid", String(!(temperature >= 0 && temperature <= 2)));
    maxTokensInput.setAttribute(
      "aria-invalid",
      String(!(Number.isInteger(maxTokens) && maxTokens >= 1 && maxTokens <= window)),
    );
    if (!(temperature >= 0 && temperature <= 2)) return "Temperature must be a number from 0 to 2.";
    if (!(Number.isInteger(maxTokens) && maxTokens >= 1 && maxTokens <= window))
      return `Max tokens must be a whole number from 1 to ${window.toLocaleString("en-US")} (this model's context window).`;
    return { temperature, maxTokens };
  }

  async #send(text: string): Promise<void> {
    const state = this.#state;
    const client = state.client;
    const chosen = this.#settings();
    if (!client || typeof chosen === "string") {
      if (typeof chosen === "string") feedback(this.#settingsFeedback, chosen, true);
      return;
    }
    feedback(this.#settingsFeedback, "");
    const model = this.#options.modelId();
    const jsonMode = element<HTMLInputElement>("json-mode").checked;
    const fromDocuments = element<HTMLInputElement>("use-documents").checked;
    const storeId = fromDocuments ? await knownStore(state).catch(() => undefined) : undefined;
    if (fromDocuments && !storeId) {
      feedback(this.#settingsFeedback, "There are no documents to answer from yet: upload some under Documents.", true);
      return;
    }
    const context = state.history.filter((entry) => !entry.failed).map(({ role, content }) => ({ role, content }));
    const message: Message = { role: "user", content: text };
    state.history.push(message);
    this.#save();
    userBubble(message).scrollIntoView({ block: "end" });
    const streaming: Streaming = {
      reply: assistantBubble(),
      model,
      jsonMode,
      started: performance.now(),
      content: "",
      simulated: false,
    };
    state.failedDownloads.delete(model);
    const controller = new AbortController();
    state.running = controller;
    this.#sendButton.disabled = true;
    this.#stopButton.disabled = false;
    try {
      const request = { model, messages: [...context, { role: "user" as const, content: text }], ...chosen };
      if (storeId) await this.#streamResponse(client, request, streaming, controller.signal, storeId);
      else await this.#stream(client, request, streaming, controller.signal);
      this.#replied(streaming);
      void this.#record(text, streaming.content);
    } catch (error) {
      this.#failed(error, message, streaming);
    } finally {
      this.#save();
      state.running = undefined;
      this.#sendButton.disabled = !this.#ready;
      this.#stopButton.disabled = true;
      prompt().focus();
      announce(state, "rate");
    }
  }

  /** Streams the reply into its bubble through the SDK, noting what the stream says. */
  async #stream(client: OpenAI, request: TurnRequest, streaming: Streaming, signal: AbortSignal): Promise<void> {
    const { data: stream, response } = await client.chat.completions
      .create(
        {
          model: request.model,
          messages: request.messages,
          stream: true,
          stream_options: { include_usage: true },
          temperature: request.temperature,
          max_tokens: request.maxTokens,
          ...(streaming.jsonMode ? { response_format: { type: "json_object" as const } } : {}),
        },
        { signal },
      )
      .withResponse();
    rememberRate(this.#state, response.headers);
    streaming.simulated =
      response.headers.get("x-inference-engine") === "deterministic" || this.#state.engine === "deterministic";
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content;
      if (delta) {
        streaming.firstToken ??= performance.now();
        streaming.content += delta;
        streaming.reply.body.textContent = streaming.content;
      }
      streaming.finish = chunk.choices[0]?.finish_reason ?? streaming.finish;
      if (chunk.usage) streaming.usage = chunk.usage;
    }
    // The SDK ends an aborted stream quietly; the person pressed Stop.
    if (signal.aborted) throw new DOMException("Stopped.", "AbortError");
  }

  /**
   * Streams an answer from the person's documents: the Responses API with `file_search` over the
   * store, the passages it cites kept with the reply.
   */
  async #streamResponse(
    client: OpenAI,
    request: TurnRequest,
    streaming: Streaming,
    signal: AbortSignal,
    storeId: string,
  ): Promise<void> {
    const { data: stream, response } = await client.responses
      .create(
        {
          model: request.model,
          input: request.messages,
          stream: true,
          temperature: request.temperature,
          // The Responses API's least is 16 tokens.
          max_output_tokens: Math.max(16, request.maxTokens),
          tools: [{ type: "file_search", vector_store_ids: [storeId] }],
          // The person asked for an answer from the documents: searched every turn, not left to the model.
          tool_choice: { type: "file_search" },
          include: ["file_search_call.results"],
          store: false,
          ...(streaming.jsonMode ? { text: { format: { type: "json_object" as const } } } : {}),
        },
        { signal },
      )
      .withResponse();
    rememberRate(this.#state, response.headers);
    streaming.simulated =
      response.headers.get("x-inference-engine") === "deterministic" || this.#state.engine === "deterministic";
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") {
        streaming.firstToken ??= performance.now();
        streaming.content += event.delta;
        streaming.reply.body.textContent = streaming.content;
      } else if (event.type === "response.completed" || event.type === "response.incomplete") {
        const usage = event.response.usage;
        if (usage)
          streaming.usage = {
            prompt_tokens: usage.input_tokens,
            completion_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
          };
        streaming.finish = event.type === "response.incomplete" ? "length" : "stop";
        streaming.sources = citedSources(event.response);
      } else if (event.type === "error") throw new Error(event.message);
    }
    if (signal.aborted) throw new DOMException("Stopped.", "AbortError");
  }

  #statsOf(streaming: Streaming): string {
    return statsText(this.#state, streaming.model, streaming.usage, streaming.started, streaming.firstToken);
  }

  #replied(streaming: Streaming): void {
    const { model, content, jsonMode } = streaming;
    const details = {
      model,
      stats: this.#statsOf(streaming),
      cut: streaming.finish === "length",
      simulated: streaming.simulated,
      json: jsonMode,
    };
    renderReply(streaming.reply.body, content, jsonMode);
    showSources(streaming.reply.li, streaming.sources);
    showDetails(streaming.reply.stats, details);
    this.#state.history.push({
      role: "assistant",
      content,
      details,
      ...(streaming.sources?.length ? { sources: streaming.sources } : {}),
    });
    this.#announcer.textContent = `Reply from ${model}${details.cut ? ", cut at max tokens" : ""}: ${content.slice(0, 300)}`;
  }

  /** A stopped reply keeps what came; any other failure replaces the bubble with an error block. */
  #failed(error: unknown, message: Message, streaming: Streaming): void {
    const described = describeError(error);
    if (described.stopped && streaming.content) {
      renderReply(streaming.reply.body, streaming.content, false);
      const details = {
        model: streaming.model,
        stats: `stopped · ${this.#statsOf(streaming)}`,
        cut: false,
        simulated: streaming.simulated,
        json: false,
      };
      showDetails(streaming.reply.stats, details);
      this.#state.history.push({ role: "assistant", content: streaming.content, details });
      void this.#record(message.content, streaming.content);
      return;
    }
    streaming.reply.li.remove();
    message.failed = described.text;
    this.#errorBlock(message, described.text, described.fix);
  }

  #submit(event: SubmitEvent): void {
    event.preventDefault();
    const text = prompt().value.trim();
    if (!text || this.#state.running || !this.#ready) return;
    // The message stays in the composer until the settings are fixed.
    const chosen = this.#settings();
    if (typeof chosen === "string") {
      feedback(this.#settingsFeedback, chosen, true);
      // On a phone the settings are a closed popover: open it, so the sentence is seen.
      const panel = element("settings-panel");
      if (matchMedia("(max-width: 40rem)").matches && !panel.matches(":popover-open")) panel.showPopover();
      return;
    }
    prompt().value = "";
    void this.#send(text);
  }

  bind(): void {
    element<HTMLFormElement>("composer").addEventListener("submit", (event) => this.#submit(event));
    prompt().addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        element<HTMLFormElement>("composer").requestSubmit();
      }
    });
    const stop = () => {
      this.#state.running?.abort();
      prompt().focus();
    };
    this.#stopButton.addEventListener("click", stop);
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.#state.running) stop();
    });
    element("clear").addEventListener("click", () => {
      this.#state.history = [];
      this.#conversationId = undefined;
      this.#save();
      conversation().replaceChildren();
      this.listConversations();
      prompt().focus();
    });
    this.#conversations.addEventListener("change", () => void this.#open(this.#conversations.value));
  }

  restore(): void {
    try {
      this.#state.history = JSON.parse(localStorage.getItem(storageKeys.conversation) ?? "[]") as Message[];
    } catch {
      this.#state.history = [];
    }
    this.#show(this.#state.history);
  }

  #show(messages: readonly Message[]): void {
    for (const message of messages) {
      if (message.role === "user") {
        userBubble(message);
        if (message.failed) this.#errorBlock(message, message.failed, undefined);
      } else {
        const bubble = assistantBubble();
        renderReply(bubble.body, message.content, message.details?.json ?? false);
        showSources(bubble.li, message.sources);
        if (message.details) showDetails(bubble.stats, message.details);
      }
    }
  }

  setReady(value: boolean): void {
    this.#ready = value;
    this.#sendButton.disabled = !value || this.#state.running !== undefined;
    this.#sendButton.title = value ? "" : "Starting…";
  }
}

function statsText(
  state: DemoState,
  model: string,
  usage: OpenAI.CompletionUsage | undefined,
  started: number,
  firstToken: number | undefined,
): string {
  const seconds = (performance.now() - (firstToken ?? started)) / 1000;
  const price = state.models.find((candidate) => candidate.id === model)?.pricing;
  const cost =
    usage && price
      ? (usage.prompt_tokens * price.input_per_1m_tokens + usage.completion_tokens * price.output_per_1m_tokens) /
        1_000_000
      : undefined;
  return [
    usage ? `${usage.prompt_tokens} + ${usage.completion_tokens} tokens` : "",
    firstToken ? `TTFT ${Math.round(firstToken - started)} ms` : "",
    usage && seconds > 0 ? `${(usage.completion_tokens / seconds).toFixed(1)} tok/s` : "",
    cost !== undefined ? `$${cost.toFixed(9)}` : "",
  ]
    .filter(Boolean)
    .join(" · ");
}

export function rememberRate(state: DemoState, headers: Headers): void {
  const names = [
    "limit-requests",
    "remaining-requests",
    "reset-requests",
    "limit-tokens",
    "remaining-tokens",
    "reset-tokens",
  ];
  if (!headers.get("x-ratelimit-limit-requests")) return;
  state.rate = Object.fromEntries(names.map((name) => [name, headers.get(`x-ratelimit-${name}`) ?? ""]));
  announce(state, "rate");
}
