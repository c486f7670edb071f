/**
 * The models view: the catalogue as this device sees it (which engine would run each model and
 * why), download and memory sizes, Download with progress, Delete, and the storage in use.
 */
import type OpenAI from "openai";
import type { LoadProgress } from "../src/index.js";
import { cpuModelId } from "./catalogue.js";
import { button, cell, describeError, element, feedback, gigabytes, labelCells, megabytes } from "./dom.js";
import { rememberRate } from "./chat.js";
import { announce, type DemoState, type ModelRow } from "./state.js";

export function progressText(progress: LoadProgress): string {
  const percent = Math.round(progress.progress * 100);
  const left =
    progress.elapsedSeconds && progress.progress > 0 && progress.progress < 1
      ? Math.round((progress.elapsedSeconds * (1 - progress.progress)) / progress.progress)
      : undefined;
  const of = progress.totalBytes ? ` of ${megabytes(progress.totalBytes)}` : "";
  return [
    progress.loadedBytes !== undefined ? `${megabytes(progress.loadedBytes)}${of}` : "",
    `${percent}%`,
    left !== undefined ? `about ${left} s left` : "",
  ]
    .filter(Boolean)
    .join(" · ");
}

/** The catalogue as `/v1/models` and `/v1/model/info` give it, through the SDK's client. */
export async function readModels(state: DemoState, client: OpenAI, key: string): Promise<void> {
  const { data: list, response } = await client.models.list().withResponse();
  rememberRate(state, response.headers);
  state.models = await Promise.all(
    list.data.map(async (model) => {
      const info = await fetch(`${state.handle!.baseURL}/model/info?model=${encodeURIComponent(model.id)}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      return (await info.json()) as ModelRow;
    }),
  );
  announce(state, "models");
}

/** A model the GPU runs first; else the CPU one; else any that runs. */
export function preferredModel(models: readonly ModelRow[], previous: string): string {
  const runnable = models.filter((model) => model.runnable.ok);
  if (runnable.some((model) => model.id === previous)) return previous;
  return (
    (
      runnable.find((model) => model.engine === "webllm") ??
      runnable.find((model) => model.id === cpuModelId) ??
      runnable[0]
    )?.id ?? ""
  );
}

function engineLabel(model: ModelRow): string {
  if (model.engine === "webllm") return "GPU (WebLLM)";
  if (model.engine === "llamacpp") return "CPU (llama.cpp)";
  if (model.engine === "deterministic") return "Simulated (deterministic)";
  return "None";
}

/** Where a download failed, in plain words, and what is true about what was kept. */
function downloadFailure(model: ModelRow, error: unknown, last: LoadProgress | undefined): string {
  const fetched = last?.loadedBytes ?? 0;
  const total = last?.totalBytes
    ? ` of ${megabytes(last.totalBytes)}`
    : model.build?.download_mb
      ? ` of ${gigabytes(model.build.download_mb)}`
      : "";
  const kept =
    fetched > 0 && model.engine === "webllm"
      ? " The finished parts are kept: Retry resumes from there."
      : " Nothing was kept: Retry starts again.";
  if (!navigator.onLine) return `This device is offline: ${megabytes(fetched)}${total} downloaded.${kept}`;
  const text = describeError(error).text;
  const host = /https?:\/\/([^/\s]+)/.exec(text)?.[1];
  if (/failed to fetch|network/i.test(text))
    return `Couldn't reach ${host ?? "the model's host"}: ${megabytes(fetched)}${total} downloaded.${kept}`;
  return `${text}${kept}`;
}

export function setupModels(state: DemoState, refresh: () => Promise<void>): { render(): Promise<void> } {
  const view = new ModelsView(state, refresh);
  element("persist").addEventListener("click", () => void view.persist());
  return { render: () => view.render() };
}

/** A model's name (with the build this device would run) and its engine (or why it cannot run here). */
function modelCells(model: ModelRow): HTMLTableCellElement[] {
  const name = document.createElement("span");
  name.append(Object.assign(document.createElement("strong"), { textContent: model.id }));
  // An embedding model serves /v1/embeddings, not the chat: the chat's model list leaves it out.
  if (model.kind === "embedding")
    name.append(Object.assign(document.createElement("small"), { className: "kind", textContent: "embeddings" }));
  if (model.build)
    name.append(
      Object.assign(document.createElement("small"), { className: "build", textContent: model.build.model_id }),
    );
  const engine = document.createElement("span");
  engine.append(model.runnable.ok ? engineLabel(model) : "Cannot run here");
  engine.append(
    Object.assign(document.createElement("small"), {
      className: "reason",
      textContent: model.runnable.ok ? model.engine_reason : (model.runnable.reason ?? ""),
    }),
  );
  return [
    cell(name),
    cell(model.context_window.toLocaleString("en-US"), "number"),
    cell(`${model.pricing.input_per_1m_tokens}\u00a0/\u00a0${model.pricing.output_per_1m_tokens}`, "number"),
    cell(model.build?.download_mb ? gigabytes(model.build.download_mb) : "—", "number"),
    cell(model.build ? gigabytes(model.build.estimated_memory_mb) : "—", "number"),
    cell(engine),
  ];
}

class ModelsView {
  readonly #state: DemoState;
  readonly #refresh: () => Promise<void>;
  readonly #status = element("models-feedback");

  constructor(state: DemoState, refresh: () => Promise<void>) {
    this.#state = state;
    this.#refresh = refresh;
  }

  async #download(model: ModelRow, slot: HTMLTableCellElement): Promise<void> {
    const bar = Object.assign(document.createElement("progress"), { max: 1, value: 0 });
    bar.setAttribute("aria-label", `Downloading ${model.id}`);
    const text = Object.assign(document.createElement("span"), { className: "progress-text" });
    slot.replaceChildren(bar, text);
    this.#state.failedDownloads.delete(model.id);
    let last: LoadProgress | undefined;
    try {
      await this.#state.handle!.loadModel(model.id, (progress) => {
        last = progress;
        bar.value = progress.progress;
        text.textContent = progressText(progress);
      });
      feedback(this.#status, `${model.id} is downloaded and ready.`);
      await this.#refresh();
      await this.render();
    } catch (error) {
      this.#state.failedDownloads.add(model.id);
      const failure = Object.assign(document.createElement("span"), {
        className: "progress-text error",
        textContent: downloadFailure(model, error, last),
      });
      slot.replaceChildren(
        failure,
        button("Retry", () => void this.#download(model, slot)),
      );
    }
  }

  /** The model's download cell: what is on this device, and the button that changes it. */
  #slot(model: ModelRow): HTMLTableCellElement {
    const slot = document.createElement("td");
    if (!model.build) slot.textContent = "Nothing to download";
    else if (!model.runnable.ok) slot.textContent = "—";
    else if (model.downloaded) {
      slot.append(model.loaded ? "Loaded " : "Downloaded ");
      slot.append(
        button("Delete", () => {
          void this.#state
            .handle!.deleteModel(model.id)
            .then(() => feedback(this.#status, `${model.id} is deleted from this device.`))
            .then(this.#refresh)
            .then(
              () => this.render(),
              (error: unknown) => feedback(this.#status, describeError(error).text, true),
            );
        }),
      );
    } else if (this.#state.failedDownloads.has(model.id))
      slot.append(button("Retry", () => void this.#download(model, slot)));
    else slot.append(button("Download", () => void this.#download(model, slot), false));
    return slot;
  }

  async render(): Promise<void> {
    const estimate = await navigator.storage?.estimate?.();
    element("storage-usage").textContent = estimate?.quota
      ? `Using ${megabytes(estimate.usage ?? 0)} of ${megabytes(estimate.quota)} this browser allows.`
      : "This browser does not report storage use.";
    element("offline-state").hidden = navigator.onLine;
    const body = element<HTMLTableElement>("models-table").tBodies[0]!;
    body.replaceChildren(
      ...this.#state.models.map((model) => {
        const row = document.createElement("tr");
        row.append(...modelCells(model), this.#slot(model));
        return row;
      }),
    );
    labelCells(element("models-table"));
  }

  async persist(): Promise<void> {
    const kept = await navigator.storage?.persist?.();
    feedback(
      this.#status,
      kept
        ? "Downloaded models will be kept when space runs low."
        : "The browser did not grant persistent storage; it may evict models when space runs low.",
      !kept,
    );
  }
}
