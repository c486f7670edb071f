import { NotFoundError } from "../core/errors/api.js";
import type { ModelEntry } from "../catalogue/entry.js";
import type { AppDependencies } from "../http/app.js";
import type { ServingDependencies } from "../http/serving.js";
import type { Services } from "../pipeline/services.js";

/** What the endpoints use: the services, how a response waits for a slow first token, and how the app writes its headers. */
export type EndpointDependencies = ServingDependencies & AppDependencies;

/** The catalogue's entry for `id`, or OpenAI's 404 for a model that does not exist. */
export function findModel(dependencies: Services, id: string, param: string | null = "model"): ModelEntry {
  const model = dependencies.catalogue.get(id);
  if (!model) {
    throw new NotFoundError(`The model \`${id}\` does not exist or you do not have access to it.`, {
      code: "model_not_found",
      param,
    });
  }
  return model;
}
