/**
 * A real HTTP server on 127.0.0.1 speaking OpenAI's protocol the way vLLM and llama-server do:
 * JSON and SSE replies, usage when asked (`stream_options.include_usage`), CORS for browsers.
 * The first path segment picks its behaviour:
 * - `ok`: a four-word reply, with usage; requires `Authorization: Bearer <secret>`;
 * - `nousage`: the same reply, never with usage (as some servers do);
 * - `fail`: 500 with an error body;
 * - `slow`: one word every 100 ms, up to 300; notes when the client hangs up early;
 * - `nocors`: like `ok` but without CORS headers, so a browser cannot read it;
 * - `llama`: llama.cpp's llama-server: streamed chat and legacy completions without `role` in the
 *   first delta and with usage sent unasked, and a legacy completion of several prompts answered
 *   as a JSON array of `text_completion` objects, one per prompt;
 * - `ollama`: Ollama's OpenAI endpoint, where a legacy completion takes one prompt, a string (a
 *   list is a 400);
 * - `moved`: a 307 to the same path under `ok` on another origin (this port on `localhost`), as
 *   a server that moved, or one that sends requests on elsewhere, answers.
 * A legacy completion's reply depends on its prompt: two words for a prompt of even length,
 * three for odd, and `prompt_tokens` is the prompt's length.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

interface UpstreamCall {
  mode: string;
  path: string;
  authorization: string | null;
  body: Record<string, unknown>;
  /** The client hung up before the reply ended. */
  aborted: boolean;
  /** Words sent before it ended. */
  sent: number;
}

export interface Upstream {
  origin: string;
  calls: UpstreamCall[];
  close(): Promise<void>;
}

const reply = ["The", " quick", " brown", " fox"];

function cors(response: ServerResponse, mode: string): void {
  if (mode === "nocors") return;
  response.setHeader("access-control-allow-origin", "*");
  response.setHeader("access-control-allow-headers", "authorization, content-type");
  response.setHeader("access-control-allow-methods", "GET, POST, OPTIONS");
}

async function readBody(request: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of request) text += chunk;
  return text;
}

/** The words a legacy completion answers `prompt` with. */
const wordsFor = (prompt: string) => reply.slice(0, 2 + (prompt.length % 2));

function completionObject(prompt: string, model: string, index: number) {
  const words = wordsFor(prompt);
  return {
    id: `cmpl-upstream-${index}`,
    object: "text_completion",
    created: 1_700_000_000,
    model,
    choices: [{ index: 0, text: words.join(""), logprobs: null, finish_reason: "length" }],
    usage: {
      prompt_tokens: prompt.length,
      completion_tokens: words.length,
      total_tokens: prompt.length + words.length,
    },
  };
}

/** A legacy completion as llama-server (several prompts: an array) or Ollama (one string prompt only) answers it. */
function legacyCompletion(mode: string, body: Record<string, unknown>, response: ServerResponse): void {
  const json = (status: number, value: unknown) =>
    response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
  const model = String(body.model);
  if (Array.isArray(body.prompt)) {
    if (mode === "ollama" || body.stream === true)
      return void json(400, {
        error: { message: "invalid prompt: expected a single string", type: "invalid_request_error" },
      });
    return void json(
      200,
      (body.prompt as string[]).map((prompt, index) => completionObject(prompt, model, index)),
    );
  }
  const prompt = String(body.prompt);
  if (body.stream !== true) return void json(200, completionObject(prompt, model, 0));
  const whole = completionObject(prompt, model, 0);
  const send = (value: unknown) =>
    response.write(
      `data: ${JSON.stringify({ id: whole.id, object: "text_completion", created: whole.created, model, ...(value as object) })}\n\n`,
    );
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const word of wordsFor(prompt))
    send({ choices: [{ index: 0, text: word, logprobs: null, finish_reason: null }] });
  send({ choices: [{ index: 0, text: "", logprobs: null, finish_reason: "length" }] });
  const includeUsage =
    mode === "llama" || (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
  if (includeUsage) send({ choices: [], usage: whole.usage });
  response.end("data: [DONE]\n\n");
}

export async function startUpstream(secret: string): Promise<Upstream> {
  const calls: UpstreamCall[] = [];
  const server = createServer(async (request, response) => {
    const [, mode = "", ...rest] = (request.url ?? "/").split("/");
    const path = `/${rest.join("/")}`;
    cors(response, mode);
    if (request.method === "OPTIONS") {
      response.writeHead(204).end();
      return;
    }
    const body = JSON.parse((await readBody(request)) || "{}") as Record<string, unknown>;
    const call: UpstreamCall = {
      mode,
      path,
      authorization: request.headers.authorization ?? null,
      body,
      aborted: false,
      sent: 0,
    };
    calls.push(call);
    const json = (status: number, value: unknown) =>
      response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
    if (mode === "moved") {
      const port = (server.address() as AddressInfo).port;
      return void response.writeHead(307, { location: `http://localhost:${port}/ok${path}` }).end();
    }
    if (mode === "fail")
      return json(500, {
        error: { message: "the GPU fell off the bus", type: "server_error", code: null, param: null },
      });
    if (mode === "ok" && call.authorization !== `Bearer ${secret}`)
      return json(401, {
        error: { message: "bad upstream key", type: "invalid_request_error", code: "invalid_api_key", param: null },
      });
    if ((mode === "llama" || mode === "ollama") && path === "/v1/completions")
      return legacyCompletion(mode, body, response);
    if (path !== "/v1/chat/completions") return json(404, { error: { message: `no route ${path}` } });

    const words = mode === "slow" ? Array.from({ length: 300 }, (_, index) => ` w${index}`) : reply;
    const usage = { prompt_tokens: 17, completion_tokens: words.length, total_tokens: 17 + words.length };
    const withUsage = mode !== "nousage";
    const base = { id: "chatcmpl-upstream", created: 1_700_000_000, model: String(body.model) };
    if (body.stream !== true) {
      return json(200, {
        ...base,
        object: "chat.completion",
        choices: [
          { index: 0, message: { role: "assistant", content: words.join("") }, logprobs: null, finish_reason: "stop" },
        ],
        ...(withUsage ? { usage } : {}),
      });
    }
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    response.on("close", () => {
      if (!response.writableFinished) call.aborted = true;
    });
    const includeUsage =
      withUsage &&
      (mode === "llama" || (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true);
    const send = (value: unknown) =>
      response.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", ...(value as object) })}\n\n`);
    if (mode !== "llama")
      send({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] });
    for (const word of words) {
      if (call.aborted) return;
      if (mode === "slow") await new Promise((resolve) => setTimeout(resolve, 100));
      send({ choices: [{ index: 0, delta: { content: word }, logprobs: null, finish_reason: null }] });
      call.sent++;
    }
    send({ choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }] });
    if (includeUsage) send({ choices: [], usage });
    response.end("data: [DONE]\n\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
