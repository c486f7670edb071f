/**
 * A static file server on 127.0.0.1 for the demo and the browser tests: each mount maps a URL
 * prefix to a folder. It serves what the build wrote; the API itself is answered by the service worker.
 */
import { createReadStream, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, normalize, resolve, sep } from "node:path";
import { Readable } from "node:stream";

/** @type {Record<string, string>} */
const contentTypes = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".webmanifest": "application/manifest+json",
  ".wasm": "application/wasm",
  ".bin": "application/octet-stream",
  ".gguf": "application/octet-stream",
  ".onnx": "application/octet-stream",
  ".map": "application/json",
  ".png": "image/png",
  ".svg": "image/svg+xml",
};

/**
 * A mount serves a folder, or files made in memory (`generate`, called on the first request for
 * one of them): a file past 4 GB that never takes the disk's room. Either kind may `interrupt`:
 * it names files whose download is cut halfway while the server's fault switch is on, a test's
 * way to make a model download fail the way a dropped connection does.
 * @typedef {{ prefix: string, interrupt?: RegExp, headers?: Record<string, string> }} MountBase
 * @typedef {MountBase & { directory: string }} FolderMount
 * @typedef {MountBase & { generate: () => { name: string, parts: Uint8Array[] }[] }} GeneratedMount
 * @typedef {FolderMount | GeneratedMount} Mount
 */
/** @typedef {{ origin: string, close(): Promise<void> }} StaticServer */
/** @typedef {{ name: string, size: number, open(end?: number): Readable, mount: Mount }} Found */

/** @param {Uint8Array[]} parts @param {number} [end] the last byte to send @returns {Readable} */
function partsStream(parts, end = Infinity) {
  return Readable.from(
    (function* () {
      let offset = 0;
      for (const part of parts) {
        if (offset > end) return;
        yield offset + part.length - 1 > end ? part.subarray(0, end - offset + 1) : part;
        offset += part.length;
      }
    })(),
    { objectMode: false },
  );
}

/**
 * @param {readonly Mount[]} mounts @param {string} pathname
 * @param {Map<GeneratedMount, Map<string, Uint8Array[]>>} made the generated mounts' files, once made
 * @returns {Found | null}
 */
function fileFor(mounts, pathname, made) {
  for (const mount of mounts) {
    if (!pathname.startsWith(mount.prefix)) continue;
    const relative = decodeURIComponent(pathname.slice(mount.prefix.length)) || "index.html";
    if ("generate" in mount) {
      const parts = generatedFiles(mount, made).get(relative);
      if (parts)
        return {
          name: relative,
          size: parts.reduce((sum, part) => sum + part.length, 0),
          open: (end) => partsStream(parts, end),
          mount,
        };
      continue;
    }
    const file = folderFile(mount.directory, relative);
    if (file) return { name: file, size: statSync(file).size, open: (end) => createReadStream(file, { end }), mount };
  }
  return null;
}

/**
 * A generated mount's files, made on the first call and kept in `made`.
 * @param {GeneratedMount} mount @param {Map<GeneratedMount, Map<string, Uint8Array[]>>} made
 */
function generatedFiles(mount, made) {
  let files = made.get(mount);
  if (!files) {
    files = new Map(mount.generate().map(({ name, parts }) => [name, parts]));
    made.set(mount, files);
  }
  return files;
}

/** The file at `relative` inside `directory` (its index.html for a folder), or null. */
function folderFile(directory, relative) {
  const root = resolve(directory);
  const candidate = normalize(join(root, relative));
  // Inside the folder, separator and all: "/srv/demo-secrets" is not inside "/srv/demo".
  if (candidate !== root && !candidate.startsWith(root.endsWith(sep) ? root : `${root}${sep}`)) return null;
  try {
    const stat = statSync(candidate);
    if (stat.isFile()) return candidate;
    if (stat.isDirectory() && statSync(join(candidate, "index.html")).isFile()) return join(candidate, "index.html");
  } catch {
    // Not in this folder.
  }
  return null;
}

/**
 * @param {readonly Mount[]} mounts
 * @param {{ port?: number, host?: string, control?: boolean, headers?: Record<string, string>, extend?: (origin: string) => { handle(request: import("node:http").IncomingMessage, response: import("node:http").ServerResponse): boolean, upgrade(request: import("node:http").IncomingMessage, socket: import("node:stream").Duplex, head: Buffer): void } }} options
 *   `control` turns on the test endpoints under /__server/; `extend` answers requests before the
 *   files (`handle` returns false to leave one to them) and takes WebSocket upgrades; `headers`
 *   go with every file served.
 * @returns {Promise<StaticServer>}
 */
export function startStaticServer(
  mounts,
  { port = 0, host = "127.0.0.1", control = false, extend, headers = {} } = {},
) {
  /** @type {ReturnType<NonNullable<typeof extend>> | undefined} */
  let extension;
  const state = { faults: true, requests: new Map() };
  /** @type {Map<GeneratedMount, Map<string, Uint8Array[]>>} */
  const made = new Map();
  /** @type {import("node:http").RequestListener} */
  const answer = (request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    if (control && answerControl(url, request, response, state)) return;
    if (extension?.handle(request, response)) return;
    const { requests } = state;
    if (request.method === "GET") requests.set(url.pathname, (requests.get(url.pathname) ?? 0) + 1);
    let found;
    try {
      found = fileFor(mounts, url.pathname, made);
    } catch (error) {
      // A malformed escape ("/%", "/%zz") is the request's fault, never the server's end.
      if (!(error instanceof URIError)) throw error;
      response
        .writeHead(400, { "content-type": "text/plain" })
        .end(`bad request: ${url.pathname} has a malformed %-escape`);
      return;
    }
    if (!found || (request.method !== "GET" && request.method !== "HEAD")) {
      response.writeHead(404, { "content-type": "text/plain" }).end(`not found: ${url.pathname}`);
      return;
    }
    const { name, size, open, mount } = found;
    response.writeHead(200, {
      "content-type": contentTypes[extname(name)] ?? "application/octet-stream",
      "content-length": String(size),
      "cache-control": "no-cache",
      ...headers,
      ...mount.headers,
      // Test control: a page asked for with ?isolated is served with COOP/COEP, so it is
      // cross-origin isolated.
      ...(control && url.searchParams.has("isolated")
        ? { "cross-origin-opener-policy": "same-origin", "cross-origin-embedder-policy": "require-corp" }
        : {}),
      // A cross-origin isolated page's Workers must be isolated too: their scripts say so.
      ...(control && extname(name) === ".js" ? { "cross-origin-embedder-policy": "require-corp" } : {}),
    });
    if (request.method === "HEAD") response.end();
    else if (state.faults && mount.interrupt?.test(name)) {
      open(Math.floor(size / 2))
        .on("end", () => response.destroy())
        .pipe(response, { end: false });
    } else open().pipe(response);
  };
  const servers = [createServer(answer)];
  return new Promise((resolvePromise, reject) => {
    servers[0].once("error", reject);
    servers[0].listen(port, host, async () => {
      const address = servers[0].address();
      const actualPort = typeof address === "object" && address ? address.port : port;
      // localhost, not 127.0.0.1: it is a secure context for service workers and WebGPU.
      const origin = `http://localhost:${actualPort}`;
      extension = extend?.(origin);
      if (host === "127.0.0.1") servers.push(...(await ipv6Loopback(answer, actualPort)));
      for (const server of servers)
        if (extension) server.on("upgrade", (request, socket, head) => extension.upgrade(request, socket, head));
      resolvePromise({
        origin,
        close: () => Promise.all(servers.map((server) => new Promise((done) => server.close(done)))).then(() => {}),
      });
    });
  });
}

/**
 * The tests' control endpoints: GET /__server/requests counts the GETs per path (404s too), and
 * POST /__server/faults with "on" or "off" switches the cuts. Returns whether it answered.
 * @param {URL} url
 * @param {import("node:http").IncomingMessage} request
 * @param {import("node:http").ServerResponse} response
 * @param {{ faults: boolean, requests: Map<string, number> }} state
 */
function answerControl(url, request, response, state) {
  if (url.pathname === "/__server/requests") {
    response
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(Object.fromEntries(state.requests)));
    return true;
  }
  if (url.pathname === "/__server/faults" && request.method === "POST") {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      state.faults = body.trim() === "on";
      response.writeHead(204).end();
    });
    return true;
  }
  return false;
}

/**
 * The same server on IPv6's loopback, [::1], where `localhost` may resolve first (macOS's hosts
 * file lists both); none where this machine has no IPv6 loopback or the port is taken there.
 * @param {import("node:http").RequestListener} answer
 * @param {number} port
 * @returns {Promise<import("node:http").Server[]>}
 */
function ipv6Loopback(answer, port) {
  const server = createServer(answer);
  return new Promise((resolvePromise) => {
    server.once("error", () => resolvePromise([]));
    server.listen(port, "::1", () => resolvePromise([server]));
  });
}
