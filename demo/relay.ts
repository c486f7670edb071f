/**
 * The tab's side of `npm start`'s relay (scripts/relay.mjs): requests that curl and servers send
 * to the server arrive here over a WebSocket; this tab fetches each one, so its service worker
 * answers as it answers the page (keys, limits, billing), and streams the response back.
 *
 * Only on a loopback host, where `npm start` serves the demo: a deployed demo has no relay and
 * never tries. A server that is not there is tried once; one that goes away is tried again.
 */
import { isLoopbackHost } from "../src/core/secure-url.js";

// The same path and header as scripts/relay.mjs (the server, plain JavaScript for Node).
const relayPath = "/__relay";
const relayedHeader = "x-webgpu-inference-relayed";
const retryMs = 3_000;

// `body`: the request's bytes in base64.
type ServerMessage =
  | { type: "request"; id: number; method: string; path: string; headers: Record<string, string>; body: string | null }
  | { type: "abort"; id: number };

export interface Relay {
  /** Whether the server is relaying to this tab now. */
  readonly connected: boolean;
}

/** Connects this tab to the relay for the API under `basePath`; `onChange` hears it connect and go. */
export function connectRelay(basePath: string, onChange: () => void): Relay {
  const relay = { connected: false };
  const running = new Map<number, AbortController>();
  const open = () => {
    const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${relayPath}`);
    socket.binaryType = "arraybuffer";
    socket.addEventListener("open", () => {
      socket.send(JSON.stringify({ type: "hello", basePath }));
      relay.connected = true;
      onChange();
    });
    socket.addEventListener("message", (event: MessageEvent<string>) => {
      const message = JSON.parse(event.data) as ServerMessage;
      if (message.type === "abort") running.get(message.id)?.abort();
      else void answer(socket, message, running);
    });
    socket.addEventListener("close", () => {
      for (const controller of running.values()) controller.abort();
      running.clear();
      const wasConnected = relay.connected;
      relay.connected = false;
      if (!wasConnected) return;
      onChange();
      setTimeout(open, retryMs);
    });
  };
  if (isLoopbackHost(location.hostname)) open();
  return relay;
}

/** The request's bytes, which the server sends in base64. */
function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index++) bytes[index] = binary.charCodeAt(index);
  return bytes;
}

async function answer(
  socket: WebSocket,
  request: Extract<ServerMessage, { type: "request" }>,
  running: Map<number, AbortController>,
): Promise<void> {
  const { id } = request;
  const controller = new AbortController();
  running.set(id, controller);
  try {
    const response = await fetch(request.path, {
      method: request.method,
      headers: { ...request.headers, [relayedHeader]: "1" },
      ...(request.body !== null ? { body: fromBase64(request.body) } : {}),
      signal: controller.signal,
    });
    socket.send(
      JSON.stringify({ type: "head", id, status: response.status, headers: Object.fromEntries(response.headers) }),
    );
    const reader = response.body?.getReader();
    for (let next = await reader?.read(); next && !next.done; next = await reader!.read()) {
      const frame = new Uint8Array(4 + next.value.byteLength);
      new DataView(frame.buffer).setUint32(0, id);
      frame.set(next.value, 4);
      socket.send(frame);
    }
    socket.send(JSON.stringify({ type: "end", id }));
  } catch (error) {
    if (socket.readyState === WebSocket.OPEN)
      socket.send(JSON.stringify({ type: "error", id, message: (error as Error).message }));
  } finally {
    running.delete(id);
  }
}
