/**
 * GGUF builds, the llama.cpp adapter's memory rules, and the engine choice, on fakes: which
 * engine `auto` picks for which device. The real engine runs in Node (llamacpp-build.test.ts)
 * and in the browser tier (test/e2e/llamacpp.spec.ts).
 */
import { describe, expect, it } from "vitest";
import { Catalogue } from "../../../src/catalogue/catalogue.js";
import { chooseGgufBuild, ggufMemoryEstimateMB, type DeviceFeatures } from "../../../src/catalogue/builds.js";
import { ggufFiles, type ModelEntry } from "../../../src/catalogue/entry.js";
import { ChoosingEngine, type HostedEngine } from "../../../src/engines/choice.js";
import { toGbnf } from "../../../src/structured/gbnf.js";
import { LlamaCppEngine } from "../../../src/engines/llamacpp/engine.js";
import { prefillBatches } from "../../../src/engines/llamacpp/prefill.js";
import { hasRelaxedDot } from "../../../src/engines/llamacpp/runtime.js";
import { setFlagsFromString } from "node:v8";
import type { GenerationPart, GenerationRequest, ModelStatus } from "../../../src/engines/contract.js";
import { schemaToGrammar } from "../../../src/structured/schema-grammar.js";
import { toolGrammar } from "../../../src/endpoints/chat/structured.js";

const kvCache = { layers: 4, kvHeads: 2, headDim: 64 };
const ggufModel = (extra: Partial<ModelEntry> = {}): ModelEntry =>
  Catalogue.create([
    {
      id: "tiny",
      family: "llama3",
      contextWindow: 2_048,
      price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 2 },
      gguf: [{ modelId: "tiny-q8_0", file: "tiny-q8_0.gguf", quantization: "Q8_0", sizeMB: 44, kvCache }],
      ...extra,
    },
  ]).get("tiny")!;

describe("GBNF", () => {
  it("renames rules to llama.cpp's alphabet and leaves literals and classes alone", () => {
    expect(toGbnf('root ::= json_value "a_b" [_x]\njson_value ::= "\\"_" # a_comment\n')).toBe(
      'root ::= json-value "a_b" [_x]\njson-value ::= "\\"_" \n',
    );
  });

  it("turns every grammar we build into names llama.cpp accepts", () => {
    const grammars = [
      schemaToGrammar({
        type: "object",
        properties: { snake_case: { type: "array", items: { enum: ["a_b", 1] } } },
        required: ["snake_case"],
      }),
      toolGrammar(
        "llama3",
        [{ name: "set_flag", parameters: { type: "object", properties: { on_off: { type: "boolean" } } } }],
        "auto",
        true,
      ),
      toolGrammar("mistral", [{ name: "pick_one", parameters: { type: "object" } }], "required", false),
    ];
    for (const grammar of grammars) {
      const names = [...toGbnf(grammar).matchAll(/^([^\s]+) ::=/gm)].map((match) => match[1]);
      expect(names.length).toBeGreaterThan(1);
      for (const name of names) expect(name).toMatch(/^[A-Za-z0-9-]+$/);
    }
  });
});

describe("GGUF builds in the catalogue", () => {
  it("every seed model has a GGUF build; alpha3:8b-instruct-q8_0 has the Q8_0 its name says, split into files of at most 2 GB", () => {
    const catalogue = Catalogue.create();
    for (const model of catalogue.list()) expect(model.gguf.length).toBeGreaterThan(0);
    const alpha = catalogue.get("alpha3:8b-instruct-q8_0")!;
    expect(alpha.gguf.map((build) => build.quantization)).toEqual(["Q8_0"]);
    expect(alpha.gguf[0]?.file).toBe("Meta-Llama-3-8B-Instruct-Q8_0-00001-of-00005.gguf");
    for (const model of catalogue.list()) {
      for (const build of model.gguf) {
        const files = Number(/-of-(\d{5})\.gguf$/.exec(build.file)?.[1] ?? 1);
        expect(build.sizeMB / files).toBeLessThanOrEqual(2_048);
      }
    }
  });

  it("refuses a file over 2 GB that is not split, and a shard other than the first", () => {
    const entry = (file: string, sizeMB: number) => () =>
      Catalogue.create([
        {
          id: "big",
          family: "llama3",
          contextWindow: 4_096,
          price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 1 },
          gguf: [{ modelId: "big", file, quantization: "Q8_0", sizeMB, kvCache }],
        },
      ]);
    expect(entry("big.gguf", 3_000)).toThrow(/split it/i);
    expect(entry("big-00002-of-00002.gguf", 3_000)).toThrow(/first shard/);
    expect(entry("big-00001-of-00002.gguf", 3_000)).not.toThrow();
    expect(ggufFiles("https://m.example/big-00001-of-00003.gguf")).toEqual([
      "https://m.example/big-00001-of-00003.gguf",
      "https://m.example/big-00002-of-00003.gguf",
      "https://m.example/big-00003-of-00003.gguf",
    ]);
    expect(ggufFiles("small.gguf")).toEqual(["small.gguf"]);
    // A query (Hugging Face's download links) or fragment stays on every shard; the name is the path's.
    expect(entry("big-00001-of-00002.gguf?download=true", 3_000)).not.toThrow();
    expect(entry("big-00002-of-00002.gguf?download=true", 3_000)).toThrow(/first shard/);
    expect(entry("big.gguf?download=true", 3_000)).toThrow(/split it/i);
    expect(entry("big.bin?name=x.gguf", 100)).toThrow(/ends in \.gguf/);
    expect(ggufFiles("https://m.example/big-00001-of-00002.gguf?download=true")).toEqual([
      "https://m.example/big-00001-of-00002.gguf?download=true",
      "https://m.example/big-00002-of-00002.gguf?download=true",
    ]);
    expect(ggufFiles("https://m.example/small.gguf#main")).toEqual(["https://m.example/small.gguf#main"]);
  });

  it("takes one pinned SHA-256 per file, in hex, and refuses any other count", () => {
    const hash = "ab".repeat(32);
    const entry = (file: string, sha256: string[]) => () =>
      Catalogue.create([
        {
          id: "pinned",
          family: "llama3",
          contextWindow: 4_096,
          price: { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 1 },
          gguf: [{ modelId: "pinned", file, quantization: "Q8_0", sizeMB: 100, kvCache, sha256 }],
        },
      ]);
    expect(entry("one.gguf", [hash])).not.toThrow();
    expect(entry("two-00001-of-00002.gguf", [hash, hash.toUpperCase()])).not.toThrow();
    expect(entry("two-00001-of-00002.gguf", [hash])).toThrow(/2 file\(s\) and 1 SHA-256/);
    expect(entry("one.gguf", ["sha256-abc="])).toThrow(/64 hexadecimal digits/);
  });

  it("estimates memory at the catalogue's window and picks the first build that fits", () => {
    const model = ggufModel();
    const build = model.gguf[0]!;
    // 44 MB of weights, an f16 KV cache of 2 × 4 × 2 × 64 × 2 bytes × 2,048 tokens (4 MB), and llama.cpp's buffers.
    expect(ggufMemoryEstimateMB(model, build)).toBe(44 + 4 + 256);
    expect(chooseGgufBuild(model, { memoryBudgetMB: 1_000 })).toMatchObject({ ok: true });
    expect(chooseGgufBuild(model, {})).toMatchObject({ ok: true });
    const refused = chooseGgufBuild(model, { memoryBudgetMB: 100 });
    expect(refused).toMatchObject({ ok: false });
    expect(refused.ok ? "" : refused.reason).toContain("memoryBudgetMB");
    // Where an address space bounds the budget, the reason names it instead.
    const bound = chooseGgufBuild(model, { memoryBudgetMB: 100, memoryLimit: "llama.cpp addresses at most 100 MB" });
    expect(bound.ok ? "" : bound.reason).toMatch(/offers about 100 MB \(llama\.cpp addresses at most 100 MB\)$/);
  });
});

function request(model: ModelEntry): GenerationRequest {
  return {
    model,
    input: {
      kind: "chat",
      messages: [{ role: "user", content: "Hi" }],
      segments: [{ text: "Hi", reply: false, tokens: [13347] }],
      tokens: [13347],
      pieces: [{ text: "Hi", control: false }],
    },
    sampling: { temperature: 0, topP: 1, maxTokens: 8, stop: [], presencePenalty: 0, frequencyPenalty: 0 },
  };
}

async function parts(generator: AsyncIterable<GenerationPart>): Promise<GenerationPart[]> {
  const list: GenerationPart[] = [];
  for await (const part of generator) list.push(part);
  return list;
}

describe("LlamaCppEngine", () => {
  it("refuses a model that does not fit, naming the option", async () => {
    const small = new LlamaCppEngine({
      assetsUrl: "https://app.example/llamacpp/",
      ggufBaseUrl: "https://app.example/",
      memoryBudgetMB: 100,
    });
    await expect(small.load(ggufModel())).rejects.toThrow(/memoryBudgetMB/);
    expect((await small.status(ggufModel())).runnable.ok).toBe(false);
  });

  it("refuses at once, loading nothing, an embedding asked only of a loaded model", async () => {
    const engine = new LlamaCppEngine({ assetsUrl: "a/", ggufBaseUrl: "https://app.example/", memoryBudgetMB: 1_000 });
    const price = { inputNanoUsdPerToken: 1, outputNanoUsdPerToken: 0 };
    const model = ggufModel({ kind: "embedding", dimensions: 8, price });
    const request = { model, inputs: [{ kind: "text" as const, text: "a query" }], onlyIfLoaded: true };
    await expect(engine.embed(request, new AbortController().signal)).rejects.toMatchObject({ kind: "not_loaded" });
    expect((await engine.status(model)).loaded).toBe(false);
  });

  it("caps the memory budget at what its wasm32 build addresses, 4 GB", async () => {
    const large = new LlamaCppEngine({ assetsUrl: "a/", ggufBaseUrl: "b/", memoryBudgetMB: 65_536 });
    expect((await large.device()).memoryBudgetMB).toBe(4_096);
  });

  it("prefills in as few batches as the batch size allows, of near-equal lengths, never a lone last token", () => {
    expect(prefillBatches(0, 30, 32)).toEqual([[0, 30]]);
    expect(prefillBatches(0, 33, 32)).toEqual([
      [0, 17],
      [17, 33],
    ]);
    expect(prefillBatches(5, 72, 32)).toEqual([
      [5, 28],
      [28, 50],
      [50, 72],
    ]);
    expect(prefillBatches(0, 100, 64)).toEqual([
      [0, 50],
      [50, 100],
    ]);
    expect(prefillBatches(3, 6, 1)).toEqual([
      [3, 4],
      [4, 5],
      [5, 6],
    ]);
    expect(prefillBatches(9, 9, 32)).toEqual([]);
    expect(prefillBatches(0, 64, 32)).toEqual([
      [0, 32],
      [32, 64],
    ]);
  });
});

/** An engine that reports `device` and records which models it served. */
function fakeEngine(name: string, device: DeviceFeatures, hosted = true): HostedEngine & { served: string[] } {
  const served: string[] = [];
  return {
    name,
    served,
    hosted: async () => hosted,
    device: async () => device,
    status: async (): Promise<ModelStatus> => ({
      downloaded: false,
      loaded: false,
      runnable: { ok: true, reason: null },
      build: null,
    }),
    load: async () => {},
    async *generate(generation) {
      served.push(generation.model.id);
      yield { type: "finish", reason: "stop", usage: { promptTokens: 1, completionTokens: 0 } };
    },
  };
}

describe("engine choice", () => {
  const mlc = { modelId: "m-q4f32", model: "m", modelLib: "m.wasm", quantization: "q4f32_1", estimatedMemoryMB: 1_000 };
  const both = ggufModel({ builds: [{ ...mlc, requiredFeatures: [], overrides: {} }] });
  const f16 = ggufModel({ builds: [{ ...mlc, requiredFeatures: ["shader-f16"], overrides: {} }] });
  const gpu: DeviceFeatures = { webgpu: true, features: new Set(["shader-f16"]), memoryBudgetMB: 8_192 };
  const cpu: DeviceFeatures = { webgpu: false, features: new Set(), memoryBudgetMB: 8_192 };

  it("auto: web-llm on a real adapter with the build's features and memory", async () => {
    const choosing = new ChoosingEngine({
      engines: { webllm: fakeEngine("webllm", gpu), llamacpp: fakeEngine("llamacpp", cpu) },
      policy: "auto",
    });
    expect(await choosing.choose(both)).toMatchObject({ name: "webllm", reason: "web-llm on the WebGPU adapter" });
  });

  it("auto: llama.cpp on a software adapter, one without the features, or none, each reason given", async () => {
    const cases: [DeviceFeatures, ModelEntry, string][] = [
      [{ ...gpu, softwareAdapter: true }, both, "software"],
      [{ ...gpu, features: new Set() }, f16, "shader-f16"],
      [{ webgpu: false, features: new Set() }, both, "no adapter"],
      [{ ...gpu, memoryBudgetMB: 500 }, both, "GPU memory"],
    ];
    for (const [device, model, reason] of cases) {
      const choosing = new ChoosingEngine({
        engines: { webllm: fakeEngine("webllm", device), llamacpp: fakeEngine("llamacpp", cpu) },
        policy: "auto",
      });
      const choice = await choosing.choose(model);
      expect(choice).toMatchObject({ name: "llamacpp" });
      expect(choice.reason).toContain(reason);
    }
  });

  it("auto: no engine when no page hosts llama.cpp or the model fits nowhere; generation is a 503-kind error with every reason", async () => {
    const unhosted = new ChoosingEngine({
      engines: { webllm: fakeEngine("webllm", cpu), llamacpp: fakeEngine("llamacpp", cpu, false) },
      policy: "auto",
    });
    const choice = await unhosted.choose(both);
    expect(choice.engine).toBeNull();
    expect(choice.reason).toContain("web-llm: WebGPU gives no adapter here");
    expect(choice.reason).toContain("llama.cpp: No open page of this app runs llama.cpp");
    await expect(parts(unhosted.generate(request(both), new AbortController().signal))).rejects.toMatchObject({
      kind: "device",
    });
    const tooBig = new ChoosingEngine({
      engines: { llamacpp: fakeEngine("llamacpp", { ...cpu, memoryBudgetMB: 100 }) },
      policy: "auto",
    });
    expect((await tooBig.choose(both)).reason).toContain("llama.cpp: tiny-q8_0 needs about");
    expect((await tooBig.status(both)).runnable.ok).toBe(false);
  });

  it("a pin (the configuration's, or the model's own) wins, even on a software adapter", async () => {
    const engines = {
      webllm: fakeEngine("webllm", { ...gpu, softwareAdapter: true }),
      llamacpp: fakeEngine("llamacpp", cpu),
    };
    expect(await new ChoosingEngine({ engines, policy: "webllm" }).choose(both)).toMatchObject({
      name: "webllm",
      reason: "the configuration's engine is 'webllm'",
    });
    const pinned = ggufModel({ builds: both.builds, engine: "webllm" });
    const choosing = new ChoosingEngine({ engines, policy: "auto" });
    expect(await choosing.choose(pinned)).toMatchObject({ name: "webllm" });
    await parts(choosing.generate(request(pinned), new AbortController().signal));
    expect(engines.webllm.served).toEqual(["tiny"]);
    expect(
      await new ChoosingEngine({ engines: { webllm: engines.webllm }, policy: "llamacpp" }).choose(both),
    ).toMatchObject({ engine: null });
  });
});

describe("which llama.cpp WebAssembly a browser gets", () => {
  it("is the relaxed SIMD build only where WebAssembly validates relaxed SIMD's dot product", () => {
    const before = hasRelaxedDot();
    // Node 20's V8 keeps relaxed SIMD behind this flag, where a browser without it would refuse
    // the relaxed build; later Node has it on, as Chromium has since 114.
    setFlagsFromString("--experimental-wasm-relaxed-simd");
    expect(hasRelaxedDot()).toBe(true);
    if (Number(process.versions.node.split(".")[0]) < 22) expect(before).toBe(false);
  });

  it("addresses 16 GB where WebAssembly has Memory64, unless the app pins the wasm32 builds", async () => {
    // Node 20's V8 keeps Memory64 behind this flag; Chromium has it on. Last in this file, since
    // a flag cannot be unset.
    setFlagsFromString("--experimental-wasm-memory64");
    const options = { assetsUrl: "a/", ggufBaseUrl: "b/", memoryBudgetMB: 65_536 };
    expect(await new LlamaCppEngine(options).device()).toMatchObject({
      memoryBudgetMB: 16_384,
      memoryLimit: expect.stringContaining("Memory64") as unknown,
    });
    expect(await new LlamaCppEngine({ ...options, addressing: "wasm32" }).device()).toMatchObject({
      memoryBudgetMB: 4_096,
      memoryLimit: expect.stringContaining('the app pinned it (`addressing: "wasm32"`)') as unknown,
    });
  });
});
