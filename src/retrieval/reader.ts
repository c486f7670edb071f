import { UnreadableFile } from "./unreadable.js";

/**
 * A document reader, imported when the first such file arrives. A service worker may not use
 * `import()`: the ready-made worker holds the readers in its one file, evaluated only here; a
 * worker an app bundles with chunks of its own cannot load them, and the file says so.
 */
export async function loadReader<Module>(load: () => Promise<Module>, kind: string): Promise<Module> {
  try {
    return await load();
  } catch (error) {
    throw new UnreadableFile(
      "unsupported_file",
      `This worker could not load its ${kind} reader (${(error as Error).message}). ` +
        "Bundle the service worker as one file (service workers may not import chunks), or upload the file's text.",
    );
  }
}
