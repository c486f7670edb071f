/**
 * The one error type of the API surface. Every failure that reaches a client is an
 * `ApiError`, and `errorResponse` (src/http/json-response.ts) is the only place that turns one into bytes, so the
 * body is always `{error:{message,type,code,param}}` (OpenAI's shape).
 *
 * As in openai-node, each status has its own class, so callers can `instanceof` them.
 */
import { EngineError } from "./engine.js";

export type ErrorType =
  | "invalid_request_error"
  | "insufficient_quota"
  // A 429's type is the limit reached, as OpenAI names it.
  | "requests"
  | "tokens"
  | "not_found_error"
  | "server_error"
  | "service_unavailable";

export interface ErrorDetails {
  type: ErrorType;
  code: string | null;
  param?: string | null;
  headers?: Record<string, string>;
}

export class ApiError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string | null;
  readonly param: string | null;
  /** Extra response headers the failure implies, such as `Retry-After`. */
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, details: ErrorDetails) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.type = details.type;
    this.code = details.code;
    this.param = details.param ?? null;
    this.headers = details.headers ?? {};
  }

  toJSON(): ErrorBody {
    return { error: { message: this.message, type: this.type, code: this.code, param: this.param } };
  }
}

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: string | null; param: string | null };
}

/** A client's id or name as an error message quotes it: whole, unless over 64 characters. */
export function quoted(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

export class BadRequestError extends ApiError {
  constructor(message: string, options: { code?: string | null; param?: string | null } = {}) {
    super(400, message, { type: "invalid_request_error", code: options.code ?? null, param: options.param ?? null });
  }
}

export class AuthenticationError extends ApiError {
  constructor(message: string) {
    super(401, message, { type: "invalid_request_error", code: "invalid_api_key" });
  }
}

export class PermissionDeniedError extends ApiError {
  constructor(message: string, options: { type?: ErrorType; code?: string } = {}) {
    super(403, message, { type: options.type ?? "insufficient_quota", code: options.code ?? "insufficient_quota" });
  }
}

export class NotFoundError extends ApiError {
  constructor(message: string, options: { code?: string; param?: string | null } = {}) {
    super(404, message, {
      type: "invalid_request_error",
      code: options.code ?? "not_found",
      param: options.param ?? null,
    });
  }
}

export class RateLimitError extends ApiError {
  /**
   * `limit` is the window reached, OpenAI's type for the error. A `retryAfterSeconds` of null
   * means no wait helps (a request larger than the limit itself): marked `x-should-retry: false`,
   * which the openai SDK honours.
   */
  constructor(message: string, limit: "requests" | "tokens", retryAfterSeconds: number | null) {
    super(429, message, {
      type: limit,
      code: "rate_limit_exceeded",
      headers:
        retryAfterSeconds === null
          ? { "x-should-retry": "false" }
          : { "retry-after": String(Math.max(1, Math.ceil(retryAfterSeconds))) },
    });
  }
}

export class InternalServerError extends ApiError {
  constructor(message: string) {
    super(500, message, { type: "server_error", code: "internal_error" });
  }
}

/**
 * A finished reply that breaks its schema where the grammar enforces a keyword only in part
 * (docs/structured-outputs.md: the keyword table). Never returned as a success; its tokens are billed, as generated.
 */
export class InvalidOutputError extends ApiError {
  constructor(message: string, param: string) {
    super(500, message, { type: "server_error", code: "invalid_model_output", param });
  }
}

export class ServiceUnavailableError extends ApiError {
  /**
   * `retryAfterSeconds` marks a transient failure (`Retry-After`); `permanent` one that a retry
   * cannot fix, marked `x-should-retry: false`, which the openai SDK honours, so a missing file
   * does not start the same download three more times.
   */
  constructor(message: string, options: { code?: string; retryAfterSeconds?: number; permanent?: boolean } = {}) {
    super(503, message, {
      type: "service_unavailable",
      code: options.code ?? "service_unavailable",
      headers: options.retryAfterSeconds
        ? { "retry-after": String(options.retryAfterSeconds) }
        : options.permanent
          ? { "x-should-retry": "false" }
          : {},
    });
  }
}

/**
 * The origin's storage is too full to keep what a request would store, while leaving the room
 * billing needs: 507, and no retry helps until space is freed.
 */
export class InsufficientStorageError extends ApiError {
  constructor(message: string) {
    super(507, message, { type: "service_unavailable", code: "storage_full", headers: { "x-should-retry": "false" } });
  }
}

/** The status, code and retry advice of each failure an engine or an asset fetch can name. */
export function engineErrorToApi(error: EngineError): ApiError {
  const retry =
    error.retryAfterSeconds !== undefined ? { retryAfterSeconds: error.retryAfterSeconds } : { permanent: true };
  switch (error.kind) {
    case "unsupported":
      return new BadRequestError(error.message, { code: "unsupported_request" });
    case "context_length":
      return new BadRequestError(error.message, { code: "context_length_exceeded", param: "messages" });
    case "busy":
      return new ServiceUnavailableError(error.message, {
        code: "engine_busy",
        retryAfterSeconds: error.retryAfterSeconds ?? 1,
      });
    case "device":
      return new ServiceUnavailableError(error.message, { code: "model_not_runnable", permanent: true });
    case "not_loaded":
      return new ServiceUnavailableError(error.message, { code: "model_not_loaded", retryAfterSeconds: 1 });
    case "load_failed":
      return new ServiceUnavailableError(error.message, { code: "model_load_failed", ...retry });
    case "asset":
      return new ServiceUnavailableError(error.message, { code: "asset_unavailable", ...retry });
    case "storage":
      return new InsufficientStorageError(error.message);
  }
}

/**
 * Unknown failures become 500 and name the request id, so a user can report it;
 * they are never blamed on the request (never 400).
 */
export function toApiError(error: unknown, requestId: string): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof EngineError) return engineErrorToApi(error);
  if ((error as { name?: unknown } | null)?.name === "QuotaExceededError")
    return new InsufficientStorageError(
      "This device's storage for this site is full, so the request could not be recorded. Free space on the device, or delete stored responses, chat completions or conversations.",
    );
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return new InternalServerError(
    `The server had an error while processing your request (request id ${requestId}): ${detail}`,
  );
}
