import { describe, expect, it } from "vitest";
import {
  ApiError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  ServiceUnavailableError,
  toApiError,
} from "../../../src/core/errors/api.js";
import { SetupError } from "../../../src/core/errors/setup.js";
import { errorResponse } from "../../../src/http/json-response.js";
import { errorBodySchema } from "../../../src/core/wire/error.js";

describe("errors", () => {
  it("one class per status, each with OpenAI's type and code", () => {
    const cases: [ApiError, number, string, string | null][] = [
      [
        new BadRequestError("bad", { param: "model", code: "invalid_value" }),
        400,
        "invalid_request_error",
        "invalid_value",
      ],
      [new AuthenticationError("no key"), 401, "invalid_request_error", "invalid_api_key"],
      [new PermissionDeniedError("insufficient balance"), 403, "insufficient_quota", "insufficient_quota"],
      [
        new NotFoundError("missing", { code: "model_not_found", param: "model" }),
        404,
        "invalid_request_error",
        "model_not_found",
      ],
      [new RateLimitError("slow down", "requests", 1.2), 429, "requests", "rate_limit_exceeded"],
      [new RateLimitError("slow down", "tokens", 1.2), 429, "tokens", "rate_limit_exceeded"],
      [new InternalServerError("boom"), 500, "server_error", "internal_error"],
      [new ServiceUnavailableError("busy"), 503, "service_unavailable", "service_unavailable"],
    ];
    for (const [error, status, type, code] of cases) {
      expect(error).toBeInstanceOf(ApiError);
      expect([error.status, error.type, error.code]).toEqual([status, type, code]);
      expect(errorBodySchema.parse(error.toJSON()).error.message).toBe(error.message);
    }
  });

  it("serialises in one place, with the headers the failure implies", async () => {
    const response = errorResponse(new RateLimitError("Rate limit reached", "tokens", 1.2), { "x-extra": "1" });
    expect(response.status).toBe(429);
    expect(response.headers.get("retry-after")).toBe("2");
    expect(response.headers.get("x-extra")).toBe("1");
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(await response.json()).toEqual({
      error: { message: "Rate limit reached", type: "tokens", code: "rate_limit_exceeded", param: null },
    });
    // A wait that cannot help: no Retry-After, and the SDK told not to retry.
    const never = errorResponse(new RateLimitError("Request too large", "tokens", null));
    expect([never.headers.get("retry-after"), never.headers.get("x-should-retry")]).toEqual([null, "false"]);
  });

  it("turns unknown failures into 500s that name the request id, never 400", () => {
    const error = toApiError(new TypeError("x is undefined"), "req_123");
    expect(error.status).toBe(500);
    expect(error.message).toContain("req_123");
    expect(error.message).toContain("TypeError: x is undefined");
    expect(toApiError("a string", "req_9").status).toBe(500);
    const known = new BadRequestError("known");
    expect(toApiError(known, "req_1")).toBe(known);
  });
});

describe("setup errors", () => {
  it("are one type, with a code and the library's name, wherever setup fails", async () => {
    const { resolveConfig } = await import("../../../src/runtime/config/config.js");
    const { assertSecureUrl } = await import("../../../src/core/secure-url.js");
    const { assets } = await import("../../../src/runtime/node/assets.js");
    const { makePolicy } = await import("../../support/unit-app.js");
    const { admin } = await makePolicy();
    const failures: [unknown, string][] = [
      [catching(() => resolveConfig({ baseUrl: "https://app.example/openai", maxQueued: -1 })), "invalid_option"],
      [catching(() => assertSecureUrl("http://api.example/openai")), "insecure_url"],
      [catching(() => assets({ families: ["nope" as never] })), "invalid_option"],
      [await admin.credit("acct_missing", 1).catch((error: unknown) => error), "not_found"],
      [await admin.createAccount({ name: "x", creditUsd: -1 }).catch((error: unknown) => error), "invalid_option"],
    ];
    for (const [error, code] of failures) {
      expect(error).toBeInstanceOf(SetupError);
      expect(error).toMatchObject({ name: "SetupError", code, message: expect.stringMatching(/^webgpu-inference: /) });
    }
  });
});

function catching(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("expected a failure");
}
