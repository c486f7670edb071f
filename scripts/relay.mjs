/**
 * The relay of `npm start`: the API runs in the browser's service worker, which curl and servers
 * cannot reach, so this server takes their requests and hands them to an open tab of the demo
 * over a WebSocket. The tab fetches each one (its service worker answers it exactly as it
 * answers the page: keys, limits, billing) and streams the response back.
 *
 * Protocol on `/__relay` (same origin only): the tab says `{type: "hello", basePath}` (the API's
 * path, e.g. `/openai`); the server sends `{type: "request", id, method, path, headers, body}`
 * (`body` the request's bytes in base64, so an uploaded file arrives as it was sent, or null)
 * and `{type: "abort", id}` when its client goes away; the tab answers `{type: "head", id,
 * status, headers}`, then binary frames (a 4-byte big-endian id, then body bytes), then
 * `{type: "end", id}` or `{type: "error", id, message}`.
 *
 * Trusting no one by default: it listens on loopback only (the static server's default); it
 * answers only requests whose Host is a loopback name (a DNS-rebinding page cannot reach it); it
 * takes WebSockets from its own page only (its port, under any loopback name); it relays the
 * fixed API path `/openai/` and nothing else (never the page's own files); a request's answer is
 * taken only from the socket it was sent to; the first tab to connect answers until it closes,
 * each response names it (`x-webgpu-inference-relay-tab`) and the server's log says when a tab
 * starts answering; frames and bodies are bounded, and a malformed frame is dropped.
 *
 * What it cannot tell apart: a local process can send any Origin and pose as a tab. Answering
 * from the first tab means one that connects while the demo's tab is open gets nothing; the log
 * line and the header show anyone who got there first.
 */
import { WebSocketServer } from "ws";

const relayPath = "/__relay";
/** The one path relayed: the demo's API. */
const apiPath = "/openai";
/**
 * The worker's own body limits are 8 MiB, and 64 MiB for an upload (a multipart/form-data body);
 * a little more lets it answer with its own 413.
 */
const maxBodyBytes = 9 * 2 ** 20;
const maxUploadBytes = 65 * 2 ** 20;
/** A frame from a tab: a head or an end is small, body bytes come in pieces. */
const maxFrameBytes = 16 * 2 ** 20;
const loopbackHosts = new Set(["localhost", "127.0.0.1", "[::1]"]);
/** Marks a request the tab makes for the relay: one the worker passes on to the network is not relayed again. */
const relayedHeader = "x-webgpu-inference-relayed";

const hopByHop = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "content-length",
  "content-encoding",
  "upgrade",
  "host",
]);

/** OpenAI's error object, as the worker itself writes it. */
function sendError(response, status, code, message) {
  const type = status === 404 || status === 413 || status === 403 ? "invalid_request_error" : "service_unavailable";
  response
    .writeHead(status, { "content-type": "application/json" })
    .end(JSON.stringify({ error: { message, type, code, param: null } }));
}

const withoutHopByHop = (headers) =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => !hopByHop.has(name)));

/** A request's response as it has gone so far: ended now, with an error if nothing was sent yet. */
function fail(response, status, code, message) {
  if (response.headersSent) response.destroy();
  else sendError(response, status, code, message);
}

/** @typedef {{ socket: import("ws").WebSocket, basePath: string }} Tab */

class Relay {
  #origin;
  #sockets = new WebSocketServer({ noServer: true, maxPayload: maxFrameBytes });
  /** @type {Tab[]} Tabs that said hello, oldest first: the oldest one answers. */
  #tabs = [];
  /** @type {Map<number, { response: import("node:http").ServerResponse, tab: Tab }>} */
  #pending = new Map();
  #nextId = 1;
  #tabNumber = 1;

  #log;

  /** @param {string} origin @param {(line: string) => void} log */
  constructor(origin, log) {
    this.#origin = origin;
    this.#log = log;
    this.#sockets.on("connection", (socket) => {
      const tab = { socket, basePath: "", number: this.#tabNumber++ };
      socket.on("message", (data, isBinary) => {
        try {
          this.#hear(tab, data, isBinary);
        } catch {
          // A malformed frame is dropped; the relay and the other requests go on.
        }
      });
      socket.on("error", () => socket.terminate());
      socket.on("close", () => this.#drop(tab));
    });
  }

  /** A Host header that names this machine's loopback, as a browser on it sends (any other is a rebinding page or a stranger). */
  #fromLoopback(request) {
    const host = String(request.headers.host ?? "");
    const name = host.startsWith("[") ? host.slice(0, host.indexOf("]") + 1) : host.split(":")[0];
    return loopbackHosts.has(name.toLowerCase());
  }

  /**
   * Whether a socket's Origin is this server's page: its port under any loopback name (the demo
   * opened at http://127.0.0.1:5173 is the same page as at localhost). Another port's page (another
   * local app) is not.
   */
  #ownPage(origin) {
    try {
      const { protocol, hostname, port } = new URL(String(origin));
      return protocol === "http:" && loopbackHosts.has(hostname) && port === new URL(this.#origin).port;
    } catch {
      return false;
    }
  }

  /** Takes the WebSocket of a tab of this server's page on /__relay. */
  upgrade(request, socket, head) {
    const { pathname } = new URL(request.url ?? "/", this.#origin);
    if (pathname !== relayPath || !this.#ownPage(request.headers.origin) || !this.#fromLoopback(request)) {
      socket.destroy();
      return;
    }
    this.#sockets.handleUpgrade(request, socket, head, (websocket) =>
      this.#sockets.emit("connection", websocket, request),
    );
  }

  /** Relays a request under the API's path to the answering tab; false for any other path (the page's files). */
  handle(request, response) {
    if (!this.#fromLoopback(request)) {
      sendError(
        response,
        403,
        "host_not_allowed",
        "This server answers requests addressed to localhost, 127.0.0.1 or [::1] only.",
      );
      return true;
    }
    const url = new URL(request.url ?? "/", this.#origin);
    if (url.pathname !== apiPath && !url.pathname.startsWith(`${apiPath}/`)) return false;
    const tab = this.#tabs[0];
    if (!tab) {
      sendError(
        response,
        503,
        "no_open_tab",
        `The API runs in the browser, in the demo's service worker: open ${this.#origin}/ and keep the tab open. This server relays requests to it while it is open.`,
      );
    } else if (request.headers[relayedHeader]) {
      sendError(response, 404, "not_found", `The demo's service worker does not answer ${url.pathname}.`);
    } else {
      this.#read(tab, request, response, `${url.pathname}${url.search}`);
    }
    return true;
  }

  /** Reads the request's body, bounded as the worker bounds it, then sends the request to `tab`. */
  #read(tab, request, response, path) {
    const upload = /^multipart\/form-data\b/i.test(request.headers["content-type"] ?? "");
    const limit = upload ? maxUploadBytes : maxBodyBytes;
    const tooLarge = () => sendError(response, 413, "request_too_large", `The request body is over ${limit} bytes.`);
    if (Number(request.headers["content-length"] ?? 0) > limit) return tooLarge();
    const chunks = [];
    let size = 0;
    request.on("data", (chunk) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
    });
    request.on("end", () => {
      if (size > limit) tooLarge();
      else this.#send(tab, request, response, path, Buffer.concat(chunks));
    });
  }

  #send(tab, request, response, path, body) {
    const id = this.#nextId++;
    this.#pending.set(id, { response, tab });
    // The client going away before the end stops the generation in the tab (and bills what streamed).
    response.on("close", () => {
      if (this.#pending.delete(id)) tab.socket.send(JSON.stringify({ type: "abort", id }));
    });
    const headers = withoutHopByHop(request.headers);
    tab.socket.send(
      JSON.stringify({
        type: "request",
        id,
        method: request.method,
        path,
        headers,
        body: body.length ? body.toString("base64") : null,
      }),
    );
  }

  /** A tab's hello, or its answer to a request: head, body bytes, end or error. */
  #hear(tab, data, isBinary) {
    if (isBinary) {
      const bytes = Buffer.from(data);
      if (bytes.length < 4) return;
      const entry = this.#pending.get(bytes.readUInt32BE(0));
      // Only the tab a request went to may answer it, and only after its head.
      if (entry?.tab === tab && entry.response.headersSent) entry.response.write(bytes.subarray(4));
      return;
    }
    const message = JSON.parse(String(data));
    if (message?.type === "hello") {
      // The demo's API path only: a socket that claims another (the page's own files) is refused.
      // Compared as given, less one trailing slash (a regex such as /\/+$/ is quadratic on a run of slashes).
      const claimed = String(message.basePath);
      if ((claimed.endsWith("/") ? claimed.slice(0, -1) : claimed) !== apiPath) {
        tab.socket.close(1008, `only ${apiPath} is relayed`);
        return;
      }
      tab.basePath = apiPath;
      if (this.#tabs.includes(tab)) return;
      this.#tabs.push(tab);
      if (this.#tabs[0] === tab) this.#announce(tab);
      return;
    }
    const entry = this.#pending.get(message?.id);
    if (!entry || entry.tab !== tab) return;
    if (message.type === "head") {
      if (
        entry.response.headersSent ||
        !Number.isInteger(message.status) ||
        message.status < 100 ||
        message.status > 599
      )
        return;
      entry.response.writeHead(message.status, {
        ...withoutHopByHop(message.headers ?? {}),
        "x-webgpu-inference-relay-tab": String(tab.number),
      });
      entry.response.flushHeaders();
      return;
    }
    this.#pending.delete(message.id);
    if (message.type === "end") entry.response.end();
    else fail(entry.response, 502, "relay_failed", `The demo tab could not fetch this request: ${message.message}`);
  }

  /** Says which socket answers from now on: one the user did not open is a process posing as a tab. */
  #announce(tab) {
    this.#log(`relay: tab ${tab.number} answers ${apiPath}/ from now on.`);
  }

  /** A tab that closed: it answers nothing more, and what it was answering ends. */
  #drop(tab) {
    const answering = this.#tabs[0] === tab;
    this.#tabs = this.#tabs.filter((candidate) => candidate !== tab);
    if (answering) {
      this.#log(`relay: tab ${tab.number} closed.`);
      if (this.#tabs[0]) this.#announce(this.#tabs[0]);
    }
    for (const [id, entry] of this.#pending) {
      if (entry.tab !== tab) continue;
      this.#pending.delete(id);
      fail(
        entry.response,
        503,
        "tab_closed",
        "The demo tab that was answering this request closed. Open the demo again and retry.",
      );
    }
  }
}

/** @param {{ origin: string, log?: (line: string) => void }} options `log` hears which tab answers (default: none). */
export function createRelay({ origin, log = () => {} }) {
  return new Relay(origin, log);
}
