/**
 * The floor plan, enforced: `src/` holds only the two entry points, every other module lives in
 * a folder named for its layer (docs/architecture.md), imports point down the layers (never up, never sideways between
 * layers of one rank), and no modules import each other in a circle.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const source = join(root, "src");

/**
 * Each layer's rank: a module may import from a lower rank or from its own layer. Layers of one
 * rank are independent of each other (the engines never import the accounts, the page never the
 * worker). A layer is a folder of `src/`; under `runtime/`, each folder is one.
 */
const ranks: Record<string, number> = {
  // errors, OpenAI's objects as zod schemas, the HTTPS rule
  core: 0,
  // models and their builds; JSON Schema as grammars
  catalogue: 1,
  structured: 1,
  // templates, tool syntax, tokenizers, control tokens
  prompt: 2,
  // the engine contract and every engine; keys, balances, limits, the ledger, stored data;
  // text extraction, chunking and the search index
  engines: 3,
  accounts: 3,
  retrieval: 3,
  // placement, budget, meter, queue, generation, upstreams
  pipeline: 4,
  // the HTTP framework: app, router, responses, SSE, validation, headers
  http: 5,
  // one folder an endpoint
  endpoints: 6,
  "runtime/config": 7,
  "runtime/bridge": 8,
  "runtime/page": 9,
  "runtime/worker": 9,
  "runtime/node": 9,
  entry: 10,
};

const entryPoints = ["index.ts", "worker.ts"];

function filesUnder(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    return statSync(path).isDirectory() ? filesUnder(path) : path.endsWith(".ts") ? [path] : [];
  });
}

/** Every relative module a file imports or re-exports, types included, as absolute .ts paths. */
function importsOf(file: string, text = readFileSync(file, "utf8")): string[] {
  const found: string[] = [];
  const specifier = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm;
  for (const match of text.matchAll(specifier)) found.push(resolve(dirname(file), match[1]!).replace(/\.js$/, ".ts"));
  return found;
}

function layerOf(file: string): string {
  const parts = relative(source, file).split("/");
  if (parts.length === 1) return "entry";
  return parts[0] === "runtime" ? `runtime/${parts[1]}` : parts[0]!;
}

/** The strongly connected components of more than one module (or a module importing itself). */
function circles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || graph.get(node)?.includes(node))
      found.push(component.map((file) => relative(root, file)).sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe("the floor plan", () => {
  const files = filesUnder(source);
  const graph = new Map(files.map((file) => [file, importsOf(file)]));

  it("keeps only the entry points at the top of src/, and they only re-export", () => {
    const loose = readdirSync(source).filter((name) => !statSync(join(source, name)).isDirectory());
    expect(loose.sort()).toEqual(entryPoints);
    for (const entry of entryPoints) {
      const statements = readFileSync(join(source, entry), "utf8")
        .replace(/\/\*[\s\S]*?\*\//g, "")
        .split(";")
        .map((statement) => statement.trim())
        .filter(Boolean);
      for (const statement of statements)
        expect(statement, `${entry} holds only re-exports`).toMatch(/^export (type )?\{[^}]*\} from "\.\/[^"]+"$/);
    }
  });

  it("puts every module in a known layer", () => {
    const unknown = [...new Set(files.map(layerOf))].filter((layer) => !(layer in ranks));
    expect(unknown).toEqual([]);
  });

  it("points every import down the layers", () => {
    const wrong: string[] = [];
    for (const [file, targets] of graph) {
      const from = layerOf(file);
      for (const target of targets) {
        const to = target.startsWith(source) ? layerOf(target) : "outside src";
        if (to === "outside src")
          wrong.push(`${relative(root, file)} → ${relative(root, target)} (outside the library)`);
        else if (to !== from && ranks[to]! >= ranks[from]!)
          wrong.push(`${relative(root, file)} (${from}) → ${relative(root, target)} (${to})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it("has no import circles", () => {
    expect(circles(graph)).toEqual([]);
  });

  it("keeps the worker entry to the worker and the demo out of everything else", () => {
    const wrong: string[] = [];
    for (const file of [...filesUnder(join(root, "sw")), ...files, ...filesUnder(join(root, "bench"))]) {
      for (const target of importsOf(file)) {
        if (target.startsWith(join(root, "demo"))) wrong.push(`${relative(root, file)} → ${relative(root, target)}`);
      }
    }
    const workerEntry = importsOf(join(root, "sw/inference-sw.ts")).map((target) => relative(root, target));
    expect(workerEntry).toEqual(["src/worker.ts"]);
    expect(wrong).toEqual([]);
  });

  it("catches what it is for: an upward import, a sideways one and a circle", () => {
    const upward = importsOf(join(source, "engines/x.ts"), 'import { Policy } from "../accounts/accounts.js";');
    expect(upward.map(layerOf)).toEqual(["accounts"]);
    expect(ranks.accounts! >= ranks.engines!).toBe(true);
    const sideways = importsOf(join(source, "runtime/page/x.ts"), 'import { x } from "../worker/install.js";');
    expect(sideways.map(layerOf)).toEqual(["runtime/worker"]);
    expect(ranks["runtime/worker"]! >= ranks["runtime/page"]!).toBe(true);
    const a = join(source, "catalogue/a.ts");
    const b = join(source, "catalogue/b.ts");
    expect(
      circles(
        new Map([
          [a, [b]],
          [b, [a]],
        ]),
      ),
    ).toHaveLength(1);
    expect(
      circles(
        new Map([
          [a, [b]],
          [b, []],
        ]),
      ),
    ).toHaveLength(0);
  });
});
