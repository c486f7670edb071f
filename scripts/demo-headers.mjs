/**
 * The headers the demo's page and worker script are served with, by `npm start` and by the
 * browser tests alike.
 *
 * The Content Security Policy: replies are model output, so nothing in one may load by itself
 * (images from this site, data: and blob: only), post a form or frame the page. The network is
 * this site (its relay's WebSocket too) and where the default catalogue's files live: Hugging
 * Face (weights and GGUF files, and the CDNs it redirects to) and GitHub's raw files (web-llm's
 * model libraries). WebAssembly is compiled (llama.cpp, web-llm), and llama.cpp runs in workers
 * made from blob: URLs. Servers on this machine's loopback (llama-server, Ollama or vLLM as a
 * remote model's upstream, as docs/remote-models.md's examples run them) may be reached too: nothing sent
 * there leaves the device. A deployment whose ?config= adds upstreams or file hosts elsewhere
 * names their origins (`npm start` takes them in DEMO_CONNECT_SRC).
 *
 * Cross-origin isolation (COOP same-origin, COEP credentialless) gives the page
 * SharedArrayBuffer, so llama.cpp runs its pthreads build on every core. `credentialless` rather
 * than `require-corp`: the catalogue's files on other hosts are fetched with CORS and need no
 * Cross-Origin-Resource-Policy header of their own.
 */
const connectSources = [
  "'self'",
  "blob:",
  "data:",
  "https://huggingface.co",
  "https://*.huggingface.co",
  "https://*.hf.co",
  "https://raw.githubusercontent.com",
  "http://127.0.0.1:*",
  "http://localhost:*",
];

/** The page's and worker's policy, with `connect` (origins, as CSP sources) added to what they may fetch. */
const contentSecurityPolicy = (connect) =>
  [
    "default-src 'self'",
    "script-src 'self' 'wasm-unsafe-eval'",
    "worker-src 'self' blob:",
    `connect-src ${[...connectSources, ...connect].join(" ")}`,
    "img-src 'self' data: blob:",
    "style-src 'self' 'unsafe-inline'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");

/** The demo's headers; `connect`: a deployment's further origins its worker fetches (upstreams, file hosts). */
export function demoHeadersWith(connect = []) {
  return {
    "content-security-policy": contentSecurityPolicy(connect),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-embedder-policy": "credentialless",
  };
}

export const demoHeaders = demoHeadersWith();
