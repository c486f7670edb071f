/**
 * Debian's Chromium with WebGPU through SwiftShader, as the browser tests and the benchmark
 * launch it; see DEVELOPERS.md for why each flag is here. On a machine with a real GPU,
 * CHROMIUM_PATH may point at any Chromium or Chrome, and the same flags apply.
 */
export const chromiumArgs = [
  "--no-sandbox",
  "--enable-unsafe-webgpu",
  "--disable-gpu-watchdog",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
  "--no-first-run",
];

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
