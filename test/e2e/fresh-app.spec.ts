/**
 * A stranger's first fifteen minutes: a fresh Vite app, made in a temp folder from a template,
 * the package as `npm pack` ships it, `openai` and the rest from the npm registry, and the
 * README's own code blocks written in verbatim. The one change: `engine: "deterministic"` in the
 * `startInference` call, since no model hub is reachable here. Nothing is copied by hand.
 *
 * Two recipes, each under `vite dev` and under `vite build` + `vite preview`: the quickstart
 * (the plugin serves the ready-made worker) and the app's own worker through vite-plugin-pwa's
 * `injectManifest`. In each, the README's streamed reply and a non-streamed one (the template's
 * probe) go through the openai SDK in Chromium.
 */
import { execSync, spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { expect, launchProfile, test } from "../support/browser.js";

const root = resolve(import.meta.dirname, "../..");
const template = resolve(import.meta.dirname, "fixtures/fresh-app");
type Recipe = "quickstart" | "own-worker";

/** The README's fenced blocks marked `<!-- recipe: name -->`, by name. */
function readmeBlocks(recipe: Recipe): Map<string, string> {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const pattern = new RegExp(`<!-- ${recipe}: (\\S+) -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``, "g");
  return new Map([...readme.matchAll(pattern)].map((match) => [match[1]!, match[2]!]));
}

/** The only change to the README's code: the simulated engine, as the README says CI uses. */
function withDeterministicEngine(code: string): string {
  const changed = code
    .replace("startInference()", 'startInference({ engine: "deterministic" })')
    .replace("startInference({\n", 'startInference({\n  engine: "deterministic",\n');
  if (changed === code)
    throw new Error("the README's main.ts no longer calls startInference() or startInference({ … })");
  return changed;
}

/**
 * The environment of a person's shell: without what this process inherited from `npm test`
 * (npm_* variables) or picked up in it (vite's build() sets NODE_ENV=production, and npm then
 * leaves out an app's devDependencies).
 */
function shellEnvironment(): NodeJS.ProcessEnv {
  const environment = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== "NODE_ENV" && name !== "INIT_CWD"),
  );
  return { ...environment, npm_config_update_notifier: "false" };
}

function run(command: string, cwd: string): string {
  return execSync(command, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], env: shellEnvironment() });
}

/** Every file of the app outside node_modules and the build output, relative to it. */
function appFiles(directory: string, prefix = ""): string[] {
  return readdirSync(join(directory, prefix), { withFileTypes: true }).flatMap((entry) => {
    const path = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.name === "node_modules" || entry.name === "dist") return [];
    return entry.isDirectory() ? appFiles(directory, path) : [path];
  });
}

let tarball = "";
const apps = new Map<Recipe, string>();

/** The fresh app for a recipe: template, README blocks, README's install command (the tarball for the package). */
function makeApp(recipe: Recipe): string {
  const existing = apps.get(recipe);
  if (existing) return existing;
  const directory = mkdtempSync(join(tmpdir(), `fresh-${recipe}-`));
  cpSync(template, directory, { recursive: true });
  const blocks = readmeBlocks(recipe);
  const install = blocks.get("install");
  if (!install || !blocks.has("src/main.ts"))
    throw new Error(`the README has no ${recipe} install command or src/main.ts`);
  for (const [path, code] of blocks) {
    if (path === "install") continue;
    mkdirSync(dirname(join(directory, path)), { recursive: true });
    writeFileSync(join(directory, path), path === "src/main.ts" ? withDeterministicEngine(code) : code);
  }
  const flags = "--prefer-offline --no-audit --no-fund";
  run(`npm install ${flags}`, directory);
  run(`${install.trim().replace(/\bwebgpu-inference\b/, tarball)} ${flags}`, directory);
  apps.set(recipe, directory);
  return directory;
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolvePort(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** Starts `vite <mode>` on a free port and resolves once it answers. */
async function serve(
  directory: string,
  mode: "dev" | "preview",
): Promise<{ url: string; server: ChildProcess; log: () => string }> {
  const port = await freePort();
  const args = [
    join(directory, "node_modules/vite/bin/vite.js"),
    ...(mode === "preview" ? ["preview"] : []),
    "--port",
    String(port),
    "--strictPort",
    "--host",
    "localhost",
  ];
  const server = spawn(process.execPath, args, {
    cwd: directory,
    stdio: ["ignore", "pipe", "pipe"],
    env: shellEnvironment(),
  });
  let output = "";
  server.stdout!.on("data", (chunk) => (output += chunk));
  server.stderr!.on("data", (chunk) => (output += chunk));
  const url = `http://localhost:${port}/`;
  for (let attempt = 0; attempt < 100; attempt++) {
    if (server.exitCode !== null) break;
    if (
      await fetch(url).then(
        (response) => response.ok,
        () => false,
      )
    )
      return { url, server, log: () => output };
    await new Promise((wait) => setTimeout(wait, 200));
  }
  server.kill();
  throw new Error(`vite ${mode} did not start:\n${output}`);
}

async function chatInBrowser(url: string, serviceWorkerUrl: string | undefined): Promise<void> {
  const profile = await launchProfile();
  try {
    const page = profile.context.pages()[0] ?? (await profile.context.newPage());
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    // The template's probe starts with the same options as the README's main.ts.
    await page.addInitScript((options) => Object.assign(window, { probeOptions: options }), {
      engine: "deterministic",
      ...(serviceWorkerUrl ? { serviceWorkerUrl } : {}),
    });
    await page.goto(url);
    await expect(page.locator("#probe")).toHaveText(/\{.+\}/, { timeout: 60_000 });
    const probe = JSON.parse((await page.locator("#probe").textContent())!) as {
      error?: string;
      object: string;
      content: string;
      usage: { completion_tokens: number };
      worker: string;
    };
    expect(probe.error).toBeUndefined();
    expect(probe.object).toBe("chat.completion");
    expect(probe.content.length).toBeGreaterThan(0);
    expect(probe.usage.completion_tokens).toBeGreaterThan(0);
    // The README's streamed reply, appended to the body token by token as text nodes of its own
    // (outside #probe, which holds the same text), is the same text, whole.
    const streamed = () =>
      page.evaluate(() =>
        [...document.body.childNodes]
          .filter((node) => node.nodeType === Node.TEXT_NODE)
          .map((node) => node.textContent)
          .join("")
          .trim(),
      );
    await expect.poll(streamed, { timeout: 30_000 }).toBe(probe.content.trim());
    expect(errors).toEqual([]);
  } finally {
    await profile.dispose();
  }
}

test.describe.configure({ mode: "serial" });

test.beforeAll(async () => {
  test.setTimeout(240_000);
  const directory = mkdtempSync(join(tmpdir(), "fresh-pack-"));
  const name = run(`npm pack --pack-destination ${directory} --silent`, root).trim().split("\n").at(-1)!;
  tarball = join(directory, name);
});

test.afterAll(() => {
  for (const directory of [...apps.values(), dirname(tarball)])
    if (directory) rmSync(directory, { recursive: true, force: true });
});

test("without Vite: the package's copy-assets command copies exactly what is selected and removes what is stale", () => {
  const directory = makeApp("quickstart");
  // A static folder outside the app, so the recipes' "nothing copied by hand" checks stay true.
  const target = mkdtempSync(join(tmpdir(), "fresh-static-"));
  try {
    run(`npx webgpu-inference copy-assets ${target}`, directory);
    // The llama.cpp build ships with the package and is copied unless --no-llamacpp.
    const llamacpp = [
      "llamacpp/llamacpp-mt-relaxed.js",
      "llamacpp/llamacpp-mt-relaxed.wasm",
      "llamacpp/llamacpp-mt.js",
      "llamacpp/llamacpp-mt.wasm",
      "llamacpp/llamacpp-mt64-relaxed.js",
      "llamacpp/llamacpp-mt64-relaxed.wasm",
      "llamacpp/llamacpp-mt64.js",
      "llamacpp/llamacpp-mt64.wasm",
      "llamacpp/llamacpp-st-relaxed.js",
      "llamacpp/llamacpp-st-relaxed.wasm",
      "llamacpp/llamacpp-st.js",
      "llamacpp/llamacpp-st.wasm",
      "llamacpp/llamacpp-st64-relaxed.js",
      "llamacpp/llamacpp-st64-relaxed.wasm",
      "llamacpp/llamacpp-st64.js",
      "llamacpp/llamacpp-st64.wasm",
      "llamacpp/llamacpp-worker.js",
    ];
    expect(appFiles(target).sort()).toEqual([
      "inference-sw.js",
      ...llamacpp,
      "tokenizers/gemma.json.gz",
      "tokenizers/llama3.json.gz",
      "tokenizers/mistral.json.gz",
      "tokenizers/qwen2.json.gz",
    ]);
    expect(
      readFileSync(join(target, "llamacpp/llamacpp-st.wasm")).equals(
        readFileSync(join(root, "wasm/llamacpp/llamacpp-st.wasm")),
      ),
    ).toBe(true);
    expect(
      readFileSync(join(target, "tokenizers/llama3.json.gz")).equals(
        readFileSync(join(root, "dist/tokenizers/llama3.json.gz")),
      ),
    ).toBe(true);
    writeFileSync(join(target, "app.css"), "body {}");
    // A pthreads script that earlier versions shipped, and this one no longer does.
    writeFileSync(join(target, "llamacpp/llamacpp-mt.worker.js"), "// stale");
    const output = run(
      `npx webgpu-inference copy-assets ${target} --families llama3,gemma2 --no-service-worker --no-llamacpp`,
      directory,
    );
    expect(output).toContain(`removed ${join(target, "inference-sw.js")}`);
    expect(output).toContain(`removed ${join(target, "llamacpp/llamacpp-mt.wasm")}`);
    expect(output).toContain(`removed ${join(target, "llamacpp/llamacpp-mt.worker.js")}`);
    expect(appFiles(target).sort()).toEqual(["app.css", "tokenizers/gemma.json.gz", "tokenizers/llama3.json.gz"]);
    expect(() => run(`npx webgpu-inference copy-assets ${target} --families llama4`, directory)).toThrow(
      /unknown model family 'llama4'/,
    );
  } finally {
    rmSync(target, { recursive: true, force: true });
  }
});

const recipes: { recipe: Recipe; workerUrl: (mode: "dev" | "preview") => string | undefined; built: string[] }[] = [
  {
    recipe: "quickstart",
    workerUrl: () => undefined,
    built: ["inference-sw.js", "tokenizers/llama3.json.gz", "tokenizers/gemma.json.gz"],
  },
  {
    recipe: "own-worker",
    workerUrl: (mode) => (mode === "dev" ? "/dev-sw.js?dev-sw" : "/sw.js"),
    built: ["sw.js", "tokenizers/llama3.json.gz"],
  },
];

for (const { recipe, workerUrl, built } of recipes) {
  test(`${recipe}: a fresh Vite app from the README chats in vite dev, with nothing copied by hand`, async () => {
    // A Vite server started, and a chat in a fresh profile.
    test.setTimeout(120_000);
    const directory = makeApp(recipe);
    const files = appFiles(directory);
    expect(files.filter((file) => /inference-sw|tokenizers|^public\//.test(file))).toEqual([]);
    expect(files.sort()).toEqual(
      [...readmeBlocks(recipe).keys()]
        .filter((path) => path !== "install")
        .concat(["index.html", "package-lock.json", "package.json", "src/probe.ts", "tsconfig.json"])
        .sort(),
    );
    run("npx tsc -p .", directory);
    const { url, server, log } = await serve(directory, "dev");
    try {
      await chatInBrowser(url, workerUrl("dev"));
    } catch (error) {
      throw new Error(`${(error as Error).message}\n--- vite dev ---\n${log()}`, { cause: error });
    } finally {
      server.kill();
    }
  });

  test(`${recipe}: the same app chats after vite build + vite preview`, async () => {
    // A Vite server started, and a chat in a fresh profile.
    test.setTimeout(120_000);
    const directory = makeApp(recipe);
    run("node node_modules/vite/bin/vite.js build", directory);
    for (const file of built) expect(existsSync(join(directory, "dist", file)), file).toBe(true);
    const { url, server } = await serve(directory, "preview");
    try {
      await chatInBrowser(url, workerUrl("preview"));
    } finally {
      server.kill();
    }
  });
}
