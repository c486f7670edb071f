#!/usr/bin/env node
/** The package's command, `webgpu-inference` (see copy-assets.ts). */
import { copyAssets } from "./copy-assets.js";

try {
  for (const line of copyAssets(process.argv.slice(2))) console.log(line);
} catch (error) {
  console.error((error as Error).message);
  process.exit(2);
}
