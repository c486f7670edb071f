/**
 * The one error type for setup failures: everything the library refuses outside an HTTP request
 * (an invalid option, a worker that is not served, a module or asset that is missing, an admin
 * call with a bad argument). Each names its cause and its fix; `code` lets an app tell them
 * apart. A failure inside a request is an `ApiError` (src/core/errors/api.ts) instead.
 */
export type SetupErrorCode =
  | "invalid_option" // an option or argument is out of range or malformed
  | "insecure_url" // a URL that is not HTTPS (loopback excepted)
  | "unsupported_browser" // no secure context, or no service workers
  | "worker_unavailable" // the worker script is not served, does not take control, or does not answer
  | "worker_refused" // the worker refused the request (other options in force, a model it cannot load)
  | "missing_module" // an engine's module was not passed or installed
  | "missing_asset" // a file the package ships is missing
  | "not_found"; // an account or key the admin API was asked about does not exist

export class SetupError extends Error {
  readonly code: SetupErrorCode;

  constructor(code: SetupErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(`webgpu-inference: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SetupError";
    this.code = code;
  }
}
