/** The two kinds of whole response: JSON, and OpenAI's error object (the only place an ApiError becomes bytes). */
import type { ApiError } from "../core/errors/api.js";

export function jsonResponse(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

export function errorResponse(error: ApiError, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(error.toJSON()), {
    status: error.status,
    headers: { "content-type": "application/json", ...headers, ...error.headers },
  });
}
