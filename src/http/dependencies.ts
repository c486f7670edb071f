import { NotFoundError } from "../errors/api.js";
import type { ModelEntry } from "../model/entry.js";
import type { Services } from "../serve/dependencies.js";
import type { ResetForm } from "./headers.js";
import type { RespondOptions } from "./respond.js";

/** What the routes use: the serving layer's services, and how responses wait for a slow first token. */
export interface HttpDependencies extends Services {
  /** When to commit a response whose first token is late; see respond.ts. */
  respond?: RespondOptions;
  /** How the `X-RateLimit-Reset-*` headers are written; an ISO 8601 timestamp by default. */
  rateLimitResets?: ResetForm;
}

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
