/**
 * Failures an engine (or an asset it needs) can name. The HTTP layer maps each kind to a status
 * (`engineErrorToApi` in src/core/errors/api.ts); anything else an engine throws is an unknown failure (500).
 */
export type EngineErrorKind =
  | "unsupported" // the request asks for something this engine cannot honour
  | "device" // this device cannot run the model
  | "context_length" // prompt plus completion exceed the context window
  | "busy" // the engine's queue is full
  | "not_loaded" // asked to run only on a loaded model (`EmbeddingRequest.onlyIfLoaded`), which is not
  | "load_failed" // the model's files could not be fetched or compiled
  | "storage" // the device has no room to keep the model's files
  | "asset"; // a file the library itself needs (a tokenizer) could not be fetched or read

export interface EngineErrorOptions {
  cause?: unknown;
  /**
   * Set when the failure is transient (the network dropped, the queue is full): a client may try
   * again after this many seconds. Unset on a load or asset failure means it is permanent (a
   * missing or corrupt file): retrying would only start the same download again.
   */
  retryAfterSeconds?: number;
}

export class EngineError extends Error {
  readonly kind: EngineErrorKind;
  readonly retryAfterSeconds: number | undefined;
  constructor(kind: EngineErrorKind, message: string, options: EngineErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "EngineError";
    this.kind = kind;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** How long a client should wait after a network failure before trying a fetch again. */
export const networkRetrySeconds = 10;

/**
 * Fetches `url` for an asset, turning every failure into an EngineError that names the URL and
 * `fix` (the option or tool that serves it): a network failure is transient, anything else
 * (404, an HTML fallback page) permanent.
 */
export async function fetchAsset(
  url: string,
  what: string,
  fix: string,
  options: {
    kind?: "asset" | "load_failed";
    fetcher?: typeof fetch;
    expect?: (response: Response) => string | null;
  } = {},
): Promise<Response> {
  const { kind = "asset", fetcher = (input, init) => fetch(input, init), expect } = options;
  let response: Response;
  try {
    response = await fetcher(url);
  } catch (error) {
    throw new EngineError(
      kind,
      `Could not fetch ${what} from ${url}: the network request failed (${(error as Error).message ?? String(error)}). Check the connection, or ${fix}.`,
      {
        cause: error,
        retryAfterSeconds: networkRetrySeconds,
      },
    );
  }
  const problem = response.ok ? (expect?.(response) ?? null) : `HTTP ${response.status}`;
  if (problem)
    throw new EngineError(
      kind,
      `Could not fetch ${what} from ${url}: ${problem}. ${fix[0]!.toUpperCase()}${fix.slice(1)}.`,
    );
  return response;
}

/** An embedding asked of an engine that has no way to embed. */
export function cannotEmbed(engine: string, model: string): EngineError {
  return new EngineError(
    "unsupported",
    `The ${engine} engine cannot embed: serve ${model} from an upstream (routing 'remote', docs/remote-models.md), on llama.cpp from a GGUF build, or with the deterministic engine.`,
  );
}

/** The refusal of `EmbeddingRequest.onlyIfLoaded`: the caller runs the request in its turn instead. */
export function notLoaded(engine: string, model: string): EngineError {
  return new EngineError(
    "not_loaded",
    `The ${engine} engine does not hold ${model} loaded, and was asked not to load it.`,
    {
      retryAfterSeconds: 1,
    },
  );
}
