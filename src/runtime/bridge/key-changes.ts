/**
 * Telling the worker that a key changed. The worker keeps keys it has looked up in memory (see
 * `Policy.authenticate`), so a key revoked or re-limited elsewhere must reach it before the
 * change may count as done: the admin API waits for that before it resolves.
 *
 * Two paths, wired in the entry points: a page asks its controlling worker and waits for the
 * answer (the message wakes a stopped worker, whose memory is then empty anyway); every change is
 * also broadcast on a channel per database, which reaches any other worker instance and a
 * worker's own `createAdmin`.
 */
export const keyChangedMessage = "webgpu-inference:key-changed";
const keyForgottenMessage = "webgpu-inference:key-forgotten";

export interface KeyChanged {
  type: typeof keyChangedMessage;
  keyId: string;
  /** On the broadcast channel: names the change, so its acknowledgement can be told apart. */
  id?: string;
}

interface KeyForgotten {
  type: typeof keyForgottenMessage;
  id: string;
}

const keyChangesChannel = (databaseName: string) => `webgpu-inference:keys:${databaseName}`;

/**
 * Broadcasts the change and resolves at the first acknowledgement, or after `waitMs` when no
 * instance that keeps keys answers (none is running, or none is configured).
 */
export function broadcastKeyChange(databaseName: string, keyId: string, waitMs: number): Promise<void> {
  const channel = new BroadcastChannel(keyChangesChannel(databaseName));
  const id = crypto.randomUUID();
  return new Promise<void>((resolve) => {
    const finish = () => {
      clearTimeout(timer);
      channel.close();
      resolve();
    };
    const timer = setTimeout(finish, waitMs);
    channel.onmessage = (event: MessageEvent<KeyForgotten | null>) => {
      if (event.data?.type === keyForgottenMessage && event.data.id === id) finish();
    };
    channel.postMessage({ type: keyChangedMessage, keyId, id } satisfies KeyChanged);
  });
}

/** Calls `forget` for each change broadcast for the database, and acknowledges it. Returns the channel's closer. */
export function listenForKeyChanges(databaseName: string, forget: (keyId: string) => void): () => void {
  const channel = new BroadcastChannel(keyChangesChannel(databaseName));
  channel.onmessage = (event: MessageEvent<KeyChanged | null>) => {
    if (event.data?.type !== keyChangedMessage) return;
    forget(event.data.keyId);
    if (event.data.id) channel.postMessage({ type: keyForgottenMessage, id: event.data.id } satisfies KeyForgotten);
  };
  return () => channel.close();
}
