/**
 * The demo's generated assets: PNG icons (drawn here, so no binary lives in the repository), the
 * web app manifest, and the list of files the worker precaches.
 */
import { crc32, deflateSync } from "node:zlib";

function chunk(type, data) {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const checksum = Buffer.alloc(4);
  checksum.writeUInt32BE(crc32(body) >>> 0);
  return Buffer.concat([length, body, checksum]);
}

/** A square icon: a rounded blue tile with a white "chip" mark. */
export function icon(size) {
  const rows = [];
  const radius = size * 0.18;
  for (let y = 0; y < size; y++) {
    const row = Buffer.alloc(1 + size * 4);
    for (let x = 0; x < size; x++) {
      const dx = Math.max(radius - x, 0, x - (size - 1 - radius));
      const dy = Math.max(radius - y, 0, y - (size - 1 - radius));
      const inside = dx * dx + dy * dy <= radius * radius;
      const u = x / size;
      const v = y / size;
      const chip = u > 0.3 && u < 0.7 && v > 0.3 && v < 0.7 && !(u > 0.4 && u < 0.6 && v > 0.4 && v < 0.6);
      const pin =
        ((u > 0.36 && u < 0.42) || (u > 0.58 && u < 0.64)) && ((v > 0.18 && v < 0.3) || (v > 0.7 && v < 0.82));
      const [red, green, blue] = chip || pin ? [255, 255, 255] : [59, 108, 246];
      row.set([red, green, blue, inside ? 255 : 0], 1 + x * 4);
    }
    rows.push(row);
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 6, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(Buffer.concat(rows))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

export const manifest = {
  name: "webgpu-inference chat",
  short_name: "Local chat",
  description:
    "Chat with language models on your own GPU, offline, through an OpenAI-compatible API in a service worker.",
  start_url: "./index.html",
  scope: "./",
  display: "standalone",
  background_color: "#ffffff",
  theme_color: "#3b6cf6",
  icons: [
    { src: "icon-192.png", sizes: "192x192", type: "image/png", purpose: "any maskable" },
    { src: "icon-512.png", sizes: "512x512", type: "image/png", purpose: "any maskable" },
  ],
};

/** A Vite plugin that emits the icons and manifest, then lists every emitted file for precaching. */
export function demoAssets() {
  return {
    name: "webgpu-inference-demo-assets",
    generateBundle(_options, bundle) {
      this.emitFile({ type: "asset", fileName: "icon-192.png", source: icon(192) });
      this.emitFile({ type: "asset", fileName: "icon-512.png", source: icon(512) });
      this.emitFile({ type: "asset", fileName: "manifest.webmanifest", source: JSON.stringify(manifest, null, 2) });
      // index.html is emitted after this hook runs; the demo always has one.
      const files = [
        ...Object.keys(bundle),
        "index.html",
        "icon-192.png",
        "icon-512.png",
        "manifest.webmanifest",
      ].filter((file) => !file.endsWith(".map"));
      this.emitFile({
        type: "asset",
        fileName: "precache.json",
        source: JSON.stringify(
          [...new Set(files)].map((file) => `./${file}`),
          null,
          2,
        ),
      });
    },
  };
}
