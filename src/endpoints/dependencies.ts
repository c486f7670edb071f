import { BadRequestError, NotFoundError } from "../core/errors/api.js";
import type { ModelEntry, ModelKind } from "../catalogue/entry.js";
import type { AppDependencies } from "../http/app.js";
import type { ServingDependencies } from "../http/serving.js";
import type { Services } from "../pipeline/services.js";

/** What the endpoints use: the services, how a response waits for a slow first token, and how the app writes its headers. */
export type EndpointDependencies = ServingDependencies & AppDependencies;

/** The endpoint a model is asked on, and the kind of model it serves. */
export interface ModelUse {
  kind: ModelKind;
  /** As OpenAI's messages name it, e.g. `v1/chat/completions`. */
  endpoint: string;
}

/**
 * The catalogue's entry for `id`, or OpenAI's 404 for a model that does not exist; with `use`,
 * OpenAI's 400 for a model of the other kind (an embedding model asked to generate, a chat model
 * asked to embed).
 */
export function findModel(
  dependencies: Services,
  id: string,
  param: string | null = "model",
  use?: ModelUse,
): ModelEntry {
  const model = dependencies.catalogue.get(id);
  if (!model) {
    throw new NotFoundError(`The model \`${id}\` does not exist or you do not have access to it.`, {
      code: "model_not_found",
      param,
    });
  }
  if (use && model.kind !== use.kind) {
    throw new BadRequestError(
      use.kind === "embedding"
        ? "You are not allowed to generate embeddings from this model"
        : `This is not a chat model and thus not supported in the ${use.endpoint} endpoint: ${model.id} is an embedding model, served by v1/embeddings.`,
      { param, code: "model_not_supported" },
    );
  }
  return model;
}
