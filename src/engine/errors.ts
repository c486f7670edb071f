/**
 * Failures an engine can name. The HTTP layer maps each kind to a status; anything else
 * an engine throws is an unknown failure (500).
 */
export type EngineErrorKind =
  | "unsupported" // the request asks for something this engine cannot honour
  | "device" // this device cannot run the model
  | "context_length" // prompt plus completion exceed the context window
  | "busy" // the engine's queue is full
  | "load_failed"; // artifacts could not be fetched or compiled

export class EngineError extends Error {
  readonly kind: EngineErrorKind;
  constructor(kind: EngineErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "EngineError";
    this.kind = kind;
  }
}
