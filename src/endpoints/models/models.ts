import { ggufMemoryEstimateMB, memoryEstimateMB } from "../../catalogue/builds.js";
import { usdPerMillion, type GgufBuild, type MlcBuild, type ModelEntry } from "../../catalogue/entry.js";
import { BadRequestError } from "../../core/errors/api.js";
import type { ModelInfo, ModelObject } from "../../core/wire/models.js";
import { decidePlacement } from "../../pipeline/placement.js";
import type { InferenceRoute } from "../../http/context.js";
import { findModel, type EndpointDependencies } from "../dependencies.js";
import { jsonResponse } from "../../http/json-response.js";

function buildInfo(model: ModelEntry, build: MlcBuild | GgufBuild): NonNullable<ModelInfo["build"]> {
  if ("file" in build) {
    return {
      format: "gguf",
      model_id: build.modelId,
      model_url: build.file,
      model_lib_url: null,
      quantization: build.quantization,
      required_features: [],
      estimated_memory_mb: Math.round(ggufMemoryEstimateMB(model, build)),
      download_mb: Math.round(build.sizeMB),
    };
  }
  return {
    format: "mlc",
    model_id: build.modelId,
    model_url: build.model,
    model_lib_url: build.modelLib,
    quantization: build.quantization,
    required_features: build.requiredFeatures,
    estimated_memory_mb: Math.round(memoryEstimateMB(model, build)),
    download_mb: build.downloadMB === undefined ? null : Math.round(build.downloadMB),
  };
}

function modelObject(model: ModelEntry): ModelObject {
  return { id: model.id, object: "model", created: model.created, owned_by: model.ownedBy };
}

export const modelPaths = { list: /^\/models\/?$/, one: /^\/models\/(?<id>.+)$/, info: /^\/model\/info\/?$/ };

export function modelRoutes(dependencies: EndpointDependencies): InferenceRoute[] {
  return [
    {
      method: "GET",
      path: modelPaths.list,
      handler: async () => ({
        response: jsonResponse({ object: "list", data: dependencies.catalogue.list().map(modelObject) }),
      }),
    },
    {
      method: "GET",
      path: modelPaths.one,
      handler: async (_context, params) => ({
        response: jsonResponse(modelObject(findModel(dependencies, params.id ?? "", null))),
      }),
    },
    {
      method: "GET",
      path: modelPaths.info,
      handler: async ({ url }) => {
        const id = url.searchParams.get("model");
        if (!id)
          throw new BadRequestError("Missing required query parameter: 'model'.", {
            param: "model",
            code: "missing_required_parameter",
          });
        const model = findModel(dependencies, id);
        return { response: jsonResponse(await modelInfo(dependencies, model)) };
      },
    },
  ];
}

/** `/v1/model/info`: the catalogue's contract, and what this device does with the model now. */
async function modelInfo(dependencies: EndpointDependencies, model: ModelEntry): Promise<ModelInfo> {
  const status = await dependencies.engine.status(model);
  const decision = decidePlacement(model, status.runnable);
  const info: ModelInfo = {
    id: model.id,
    object: "model.info",
    kind: model.kind,
    family: model.family,
    context_window: model.contextWindow,
    dimensions: model.dimensions ?? null,
    matryoshka_dimensions: model.matryoshkaDimensions ?? null,
    pricing: {
      currency: "USD",
      input_per_1m_tokens: usdPerMillion(model.price.inputNanoUsdPerToken),
      output_per_1m_tokens: usdPerMillion(model.price.outputNanoUsdPerToken),
      input_nano_usd_per_token: model.price.inputNanoUsdPerToken,
      output_nano_usd_per_token: model.price.outputNanoUsdPerToken,
    },
    engine: status.engine?.name ?? dependencies.engine.name,
    engine_reason: status.engine?.reason ?? "the configured engine",
    build: status.build ? buildInfo(model, status.build) : null,
    builds: model.builds.map((build) => build.modelId),
    gguf_builds: model.gguf.map((build) => build.modelId),
    downloaded: status.downloaded,
    loaded: status.loaded,
    threads: status.threads ?? null,
    runnable: status.runnable,
    routing: {
      policy: decision.policy,
      target: decision.target,
      reason: decision.reason,
      upstreams: model.upstreams.map((upstream) => upstream.name),
    },
    generated_by:
      decision.target === "local"
        ? { where: "device", engine: status.engine?.name ?? dependencies.engine.name, hosts: [] }
        : {
            where: "upstream",
            engine: null,
            hosts: decision.upstreams.map((upstream) => new URL(upstream.baseUrl).host),
          },
  };
  return info;
}
