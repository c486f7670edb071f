/** Messages a page sends the worker to manage models; shared by both sides. */
import type { LoadProgress } from "./engine/types.js";

export const manageMessage = "webgpu-inference:manage";

export interface ManageRequest {
  type: typeof manageMessage;
  action: "load" | "delete";
  modelId: string;
}

/** Progress while loading, then one final `ok`. */
export type ManageReply = { progress: LoadProgress } | { ok: true } | { ok: false; message: string };
