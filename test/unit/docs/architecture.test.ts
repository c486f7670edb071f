/**
 * docs/architecture.md's trace of one request names the files it passes through: each path it
 * names exists, so a file moved or renamed fails here until the trace follows it.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../../..");
const architecture = readFileSync(join(root, "docs/architecture.md"), "utf8");

/** The section under `## A request traced`, up to the next heading of its level. */
function traceSection(): string {
  const start = architecture.indexOf("\n## A request traced\n");
  if (start < 0) throw new Error('docs/architecture.md has no section "## A request traced"');
  const end = architecture.indexOf("\n## ", start + 1);
  return architecture.slice(start, end < 0 ? undefined : end);
}

/** Every backticked file path: a name with a folder and an extension. */
function namedPaths(text: string): string[] {
  return [...text.matchAll(/`([\w.-]+(?:\/[\w.-]+)+\.[a-z]+)`/g)].map((match) => match[1]!);
}

describe("docs/architecture.md", () => {
  it("traces one request through at least eight files of the library", () => {
    const paths = new Set(namedPaths(traceSection()));
    expect([...paths].filter((path) => path.startsWith("src/")).length).toBeGreaterThanOrEqual(8);
  });

  it("names only paths that exist, in the trace and everywhere else", () => {
    const missing = namedPaths(architecture).filter((path) => !existsSync(join(root, path)));
    expect(missing).toEqual([]);
  });

  it("names every layer the architecture test ranks", () => {
    const folders = readFileSync(join(root, "test/unit/architecture.test.ts"), "utf8").matchAll(
      /^\s+"?([a-z/]+)"?: \d+,$/gm,
    );
    const layers = [...folders].map((match) => match[1]!).filter((layer) => layer !== "entry");
    expect(layers.length).toBeGreaterThan(5);
    for (const layer of layers) expect(architecture, layer).toContain(`\`${layer}/\``);
  });
});
