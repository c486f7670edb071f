/**
 * Where a request for a model is served: on this device, or by the model's upstreams. Pure: the
 * model and whether the engine can run it here in, the decision and its reason out, so `/v1/model/info`, the
 * response headers and the handlers all say the same thing.
 */
import type { Engine } from "../engines/contract.js";
import {
  localEngines,
  type LocalEngine,
  type ModelEntry,
  type RoutingPolicy,
  type Upstream,
} from "../catalogue/entry.js";

export interface PlacementDecision {
  target: "local" | "remote";
  policy: RoutingPolicy;
  reason: string;
  upstreams: Upstream[];
}

/** `runnable` is the engine's own verdict (`Engine.status`): the adapter's features and limits, and the build's memory estimate against the budget. */
export function decidePlacement(
  model: ModelEntry,
  runnable: { ok: boolean; reason: string | null },
): PlacementDecision {
  const decision = (target: PlacementDecision["target"], reason: string): PlacementDecision => ({
    target,
    policy: model.routing,
    reason,
    upstreams: target === "remote" ? model.upstreams : [],
  });
  if (model.routing === "local") return decision("local", "routing is 'local'");
  if (model.routing === "remote") return decision("remote", "routing is 'remote'");
  if (runnable.ok) return decision("local", "this device can run it");
  return decision("remote", `this device cannot run it: ${runnable.reason ?? "no reason given"}`);
}

/** Where a request is served, and for a local one the engine that runs it and why. */
export interface Placement {
  decision: PlacementDecision;
  /** Chosen once per request: the plan names it, so the engine that runs is the one the headers name. */
  engine?: { name: string; reason: string; threads?: number };
}

/**
 * Where `model` is served now. The engine is asked whether it can run the model only when the
 * policy is `auto`; a local request names its engine: the one chosen for the model, else the
 * configured one (as model info says).
 */
export async function placementOf(engine: Engine, model: ModelEntry): Promise<Placement> {
  const status = model.routing === "auto" ? await engine.status(model) : undefined;
  const decision = decidePlacement(model, status?.runnable ?? { ok: false, reason: null });
  if (decision.target === "remote") return { decision };
  return {
    decision,
    engine: status?.engine ?? (await engine.choice?.(model)) ?? { name: engine.name, reason: "the configured engine" },
  };
}

/** The chosen engine as a generation plan names it: one of the local engines, or none to pin. */
export function chosenEngine(placement: Placement): LocalEngine | undefined {
  const name = placement.engine?.name;
  return localEngines.find((engine) => engine === name);
}
