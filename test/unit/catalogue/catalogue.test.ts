import { describe, expect, it } from "vitest";
import { Catalogue } from "../../../src/catalogue/catalogue.js";
import { chooseBuild, memoryEstimateMB } from "../../../src/catalogue/builds.js";
import { usdPerMillion } from "../../../src/catalogue/entry.js";
import { assertSecureUrl, differingOptions, resolveConfig } from "../../../src/runtime/config/config.js";

describe("catalogue", () => {
  const catalogue = Catalogue.create();
  it("keeps the seed contract exactly: ids, context windows and prices", () => {
    const rows = catalogue
      .list()
      .filter((model) => model.kind === "chat")
      .map((model) => [
        model.id,
        model.contextWindow,
        usdPerMillion(model.price.inputNanoUsdPerToken),
        usdPerMillion(model.price.outputNanoUsdPerToken),
      ]);
    expect(rows).toEqual([
      ["alpha3:8b-instruct-q8_0", 8192, 0.01, 0.02],
      ["alpha-3-70b-instruct", 16384, 0.1, 0.2],
      ["beta-2-9b-it", 8192, 0.005, 0.01],
      ["gamma-7b-instruct-v0.3", 4096, 0.001, 0.002],
    ]);
    for (const model of catalogue.list()) {
      expect(Number.isInteger(model.price.inputNanoUsdPerToken)).toBe(true);
      expect(Number.isInteger(model.price.outputNanoUsdPerToken)).toBe(true);
    }
  });

  it("seeds two embedding models: snowflake-arctic-embed-s on both engines, nomic-embed-text-v1.5 on llama.cpp", () => {
    const embedding = catalogue.list().filter((model) => model.kind === "embedding");
    expect(
      embedding.map((model) => [
        model.id,
        model.dimensions,
        model.matryoshkaDimensions,
        model.builds.map((build) => build.modelId),
        model.gguf.map((build) => build.file),
        model.price.outputNanoUsdPerToken,
      ]),
    ).toEqual([
      [
        "snowflake-arctic-embed-s",
        384,
        undefined,
        ["snowflake-arctic-embed-s-q0f32-MLC-b4"],
        ["snowflake-arctic-embed-s-Q8_0.gguf"],
        0,
      ],
      ["nomic-embed-text-v1.5", 768, [64, 128, 256, 512], [], ["nomic-embed-text-v1.5.Q8_0.gguf"], 0],
    ]);
    // The MLC build is web-llm's own prebuilt record: its weights folder and library.
    expect(catalogue.get("snowflake-arctic-embed-s")?.builds[0]).toMatchObject({
      model: "snowflake-arctic-embed-s-q0f32-MLC",
      modelLib: "snowflake-arctic-embed-s-q0f32-ctx512_cs512_batch4-webgpu.wasm",
    });
  });

  it("maps each model to its real MLC builds", () => {
    expect(catalogue.get("alpha3:8b-instruct-q8_0")?.builds.map((build) => build.modelId)).toEqual([
      "Llama-3-8B-Instruct-q4f16_1-MLC",
      "Llama-3-8B-Instruct-q4f32_1-MLC",
    ]);
    expect(catalogue.get("alpha-3-70b-instruct")?.builds.map((build) => build.modelId)).toEqual([
      "Llama-3-70B-Instruct-q3f16_1-MLC",
    ]);
    expect(catalogue.get("beta-2-9b-it")?.builds.map((build) => build.modelId)).toEqual([
      "gemma-2-9b-it-q4f16_1-MLC",
      "gemma-2-9b-it-q4f32_1-MLC",
    ]);
    expect(catalogue.get("gamma-7b-instruct-v0.3")?.builds.map((build) => build.modelId)).toEqual([
      "Mistral-7B-Instruct-v0.3-q4f16_1-MLC",
      "Mistral-7B-Instruct-v0.3-q4f32_1-MLC",
    ]);
  });

  it("chooses the f32 fallback when the adapter lacks shader-f16, and says why a model cannot run", () => {
    const llama = catalogue.get("alpha3:8b-instruct-q8_0")!;
    const withF16 = chooseBuild(llama, { webgpu: true, features: new Set(["shader-f16"]) });
    const withoutF16 = chooseBuild(llama, { webgpu: true, features: new Set() });
    expect(withF16.ok && withF16.build.modelId).toBe("Llama-3-8B-Instruct-q4f16_1-MLC");
    expect(withoutF16.ok && withoutF16.build.modelId).toBe("Llama-3-8B-Instruct-q4f32_1-MLC");
    const big = chooseBuild(catalogue.get("alpha-3-70b-instruct")!, { webgpu: true, features: new Set() });
    expect(big).toMatchObject({ ok: false, reason: expect.stringContaining("shader-f16") });
    const tooLarge = chooseBuild(catalogue.get("alpha-3-70b-instruct")!, {
      webgpu: true,
      features: new Set(["shader-f16"]),
      memoryBudgetMB: 8192,
    });
    expect(tooLarge).toMatchObject({
      ok: false,
      reason: expect.stringContaining("34993 MB of GPU memory at its 16384-token context window"),
    });
    expect(chooseBuild(llama, { webgpu: false, features: new Set() })).toMatchObject({
      ok: false,
      reason: expect.stringContaining("WebGPU"),
    });
  });

  it("lets an app override a seed model and add its own", () => {
    const custom = Catalogue.create([
      { id: "gamma-7b-instruct-v0.3", contextWindow: 2048 },
      {
        id: "my-model",
        family: "qwen2",
        contextWindow: 4096,
        price: { inputNanoUsdPerToken: 3, outputNanoUsdPerToken: 4 },
        builds: [
          {
            modelId: "Qwen2-0.5B-Instruct-q4f32_1-MLC",
            model: "Qwen2-0.5B-Instruct-q4f32_1-MLC",
            modelLib: "lib.wasm",
            quantization: "q4f32_1",
            estimatedMemoryMB: 900,
          },
        ],
      },
    ]);
    expect(custom.get("gamma-7b-instruct-v0.3")?.contextWindow).toBe(2048);
    expect(custom.get("gamma-7b-instruct-v0.3")?.price.inputNanoUsdPerToken).toBe(1);
    expect(custom.get("my-model")?.builds[0]?.requiredFeatures).toEqual([]);
    expect(() => Catalogue.create([{ id: "half-a-model", contextWindow: 10 }])).toThrow();
  });
});

describe("memory estimates", () => {
  it("count the KV cache at the catalogue's context window, not web-llm's 4,096", () => {
    const catalogue = Catalogue.create();
    const estimates = Object.fromEntries(
      catalogue
        .list()
        .flatMap((model) => model.builds.map((build) => [build.modelId, Math.round(memoryEstimateMB(model, build))])),
    );
    // 2 × layers × KV heads × head dim × bytes (2 for f16, 4 for f32) per token beyond 4,096.
    expect(estimates).toEqual({
      "Llama-3-8B-Instruct-q4f16_1-MLC": 5_001 + 512,
      "Llama-3-8B-Instruct-q4f32_1-MLC": 6_101 + 1_024,
      "Llama-3-70B-Instruct-q3f16_1-MLC": 31_153 + 3_840,
      "gemma-2-9b-it-q4f16_1-MLC": 6_422 + 1_344,
      "gemma-2-9b-it-q4f32_1-MLC": 8_383 + 2_688,
      "Mistral-7B-Instruct-v0.3-q4f16_1-MLC": 4_573,
      "Mistral-7B-Instruct-v0.3-q4f32_1-MLC": 5_619,
      // An embedding model's 512-token window is under web-llm's 4,096: nothing is added.
      "snowflake-arctic-embed-s-q0f32-MLC-b4": 239,
    });
    const gemma = catalogue.get("beta-2-9b-it")!;
    const choice = chooseBuild(gemma, { webgpu: true, features: new Set(), memoryBudgetMB: 10_000 });
    expect(choice).toMatchObject({ ok: false });
    expect(choice.ok ? "" : choice.reason).toContain(
      "needs about 11071 MB of GPU memory at its 8192-token context window",
    );
  });
});

describe("configuration", () => {
  it("refuses plain-HTTP base URLs except on loopback", () => {
    expect(assertSecureUrl("https://api.example/openai").host).toBe("api.example");
    for (const ok of [
      "http://localhost:5173/openai",
      "http://127.0.0.1/x",
      "http://[::1]:8080/",
      "http://dev.localhost/",
    ])
      expect(() => assertSecureUrl(ok)).not.toThrow();
    for (const bad of ["http://api.example/openai", "http://192.168.1.5/v1", "ftp://files.example/"])
      expect(() => assertSecureUrl(bad)).toThrow(/must use https:/);
    expect(() => resolveConfig({ baseUrl: "http://api.example/openai" })).toThrow(/https:/);
  });

  it("fills in defaults, and names the option at fault", () => {
    expect(resolveConfig({ baseUrl: "https://a.example/openai" })).toMatchObject({
      engine: "webllm",
      maxQueued: 32,
      models: [],
    });
    expect(() => resolveConfig({ baseUrl: "https://a.example/openai", engine: "gpt" as never })).toThrow(
      /the option `engine` is invalid/,
    );
    expect(() => resolveConfig({ baseUrl: "https://a.example/openai", limits: { rpm: 0 } })).toThrow(
      /the option `limits.rpm` is invalid/,
    );
  });

  it("lists the options that differ, with both values", () => {
    const current = resolveConfig({ baseUrl: "https://a.example/openai", engine: "deterministic" });
    const wanted = resolveConfig({ baseUrl: "https://a.example/openai", maxQueued: 4 });
    expect(differingOptions(current, wanted)).toEqual(['engine: "deterministic" → "webllm"', "maxQueued: 32 → 4"]);
    expect(differingOptions(current, wanted, ["baseUrl"])).toEqual([]);
  });
});

describe("startInference", () => {
  it("refuses to start outside a secure context, and says why", async () => {
    const { startInference } = await import("../../../src/index.js");
    const global = globalThis as { isSecureContext?: boolean; location?: unknown };
    const previous = { isSecureContext: global.isSecureContext, location: global.location };
    global.isSecureContext = false;
    global.location = { origin: "http://192.0.2.7" };
    try {
      await expect(startInference()).rejects.toThrow(
        /needs a secure context \(HTTPS, or http:\/\/localhost in development\).*http:\/\/192\.0\.2\.7/,
      );
    } finally {
      global.isSecureContext = previous.isSecureContext;
      global.location = previous.location;
    }
  });
});
