/**
 * The headers the demo's page and worker script are served with, by `npm start` and by the
 * browser tests alike.
 *
 * The Content Security Policy: replies are model output, so nothing in one may load by itself
 * (images from this site, data: and blob: only), post a form or frame the page. The network is
 * this site (its relay's WebSocket too) and where the default catalogue's files live: Hugging
 * Face (weights and GGUF files, and the CDNs it redirects to) and GitHub's raw files (web-llm's
 * model libraries). WebAssembly is compiled (llama.cpp, web-llm), and llama.cpp runs in workers
 * made from blob: URLs. A deployment whose ?config= adds remote upstreams or other file hosts
 * adds their origins to connect-src.
 *
 * Cross-origin isolation (COOP same-origin, COEP credentialless) gives the page
 * SharedArrayBuffer, so llama.cpp runs its pthreads build on every core. `credentialless` rather
 * than `require-corp`: the catalogue's files on other hosts are fetched with CORS and need no
 * Cross-Origin-Resource-Policy header of their own.
 */
const contentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self' 'wasm-unsafe-eval'",
  "worker-src 'self' blob:",
  "connect-src 'self' blob: data: https://huggingface.co https://*.huggingface.co https://*.hf.co https://raw.githubusercontent.com",
  "img-src 'self' data: blob:",
  "style-src 'self' 'unsafe-inline'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

export const demoHeaders = {
  "content-security-policy": contentSecurityPolicy,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-embedder-policy": "credentialless",
};
