/**
 * Which worker instances are alive, so that only reservations whose holder is known to be gone
 * are released. Each instance holds a Web Lock named for it for as long as its global scope
 * lives; the browser releases the lock when the instance is terminated, killed or crashes. A
 * worker starting while the one it replaces still finishes its streams (an update) sees that one
 * alive and leaves its reservations to it.
 */

/** The part of the Web Locks API used here (`navigator.locks`, in pages and workers alike). */
export interface LockManagerLike {
  request(name: string, callback: () => Promise<unknown>): Promise<unknown>;
  query(): Promise<{ held?: { name?: string }[] }>;
}

export interface Liveness {
  /** Marks `holder` alive for as long as this global scope lives. */
  hold(holder: string): void;
  /** The holders alive now, or null where that cannot be known (no Web Locks). */
  alive(): Promise<ReadonlySet<string> | null>;
}

const lockPrefix = "webgpu-inference-holder:";

export function webLocksLiveness(
  locks: LockManagerLike | undefined = (globalThis.navigator as { locks?: LockManagerLike } | undefined)?.locks,
): Liveness {
  return {
    hold(holder) {
      // Held until the scope ends: the callback's promise never settles.
      void locks?.request(`${lockPrefix}${holder}`, () => new Promise(() => undefined)).catch(() => undefined);
    },
    async alive() {
      if (!locks) return null;
      const { held = [] } = await locks.query();
      return new Set(
        held
          .map((lock) => lock.name ?? "")
          .filter((name) => name.startsWith(lockPrefix))
          .map((name) => name.slice(lockPrefix.length)),
      );
    },
  };
}
