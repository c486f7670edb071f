/**
 * Debian's Chromium with WebGPU through SwiftShader, as the browser tests and the benchmark
 * launch it. On a machine with a real GPU, CHROMIUM_PATH may point at any Chromium or Chrome,
 * and the same flags apply.
 */
export const chromiumArgs = [
  // Root in a container has no user namespace for the sandbox.
  "--no-sandbox",
  // WebGPU on Linux is behind this flag; without it Chromium shows navigator.gpu but gives no
  // adapter (the "no usable GPU" case the tests launch on purpose).
  "--enable-unsafe-webgpu",
  // A token on SwiftShader takes seconds: the watchdog would take that for a hung GPU.
  "--disable-gpu-watchdog",
  // No network but the test server's: nothing fetched in the background, no QUIC probes.
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
  "--no-first-run",
];

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
