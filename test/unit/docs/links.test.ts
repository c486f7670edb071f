/**
 * The README and the docs as a reader follows them: the README links every page of the docs,
 * every relative link in them (a file, or a heading's anchor) leads somewhere, and every file of
 * this repository they name is there.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../../..");

/** The pages: the README, the docs tree, and the topic pages kept at the top or beside their code. */
const pages = [
  "README.md",
  "SECURITY.md",
  "CONTRIBUTING.md",
  "bench/README.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

/** The files of an app that the README's recipes write, not this repository's. */
const appFiles = new Set(["src/main.ts", "src/sw.ts"]);

function text(page: string): string {
  return readFileSync(join(root, page), "utf8");
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{Letter}\p{Number} _-]/gu, "")
    .replace(/ /g, "-");
}

function anchorsOf(page: string): Set<string> {
  const withoutCode = text(page).replace(/```[\s\S]*?```/g, "");
  return new Set([...withoutCode.matchAll(/^#{1,6} (.+)$/gm)].map((match) => anchor(match[1]!)));
}

/** Every relative link of a page, as [target page, anchor]. */
function linksOf(page: string): { target: string; fragment: string | undefined; written: string }[] {
  const links = [...text(page).matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!);
  return links
    .filter((link) => !/^[a-z]+:/.test(link))
    .map((link) => {
      const [path, fragment] = link.split("#");
      const target = path ? relative(root, resolve(root, dirname(page), path)) : page;
      return { target, fragment, written: link };
    });
}

describe("the docs", () => {
  it("the README links every page of the docs", () => {
    const linked = new Set(linksOf("README.md").map((link) => link.target));
    expect(pages.filter((page) => page !== "README.md" && !linked.has(page))).toEqual([]);
  });

  it.each(pages)("every relative link of %s leads to a file, and to a heading there", (page) => {
    const broken = linksOf(page).filter(
      ({ target, fragment }) =>
        !existsSync(join(root, target)) || (fragment !== undefined && !anchorsOf(target).has(fragment)),
    );
    expect(broken.map((link) => link.written)).toEqual([]);
  });

  it.each(pages)("every file of the repository that %s names exists", (page) => {
    const named = [...text(page).matchAll(/`((?:src|test|scripts|bench|demo|sw|native|wasm|docs)\/[\w./-]+)`/g)];
    const missing = named
      .map((match) => match[1]!)
      .filter((path) => !appFiles.has(path) && !existsSync(join(root, path)));
    expect(missing).toEqual([]);
  });

  it("the README stays short", () => {
    expect(text("README.md").split("\n").length).toBeLessThanOrEqual(300);
  });
});
