/**
 * The origin's storage, shared by the ledger, stored data and model downloads. Whatever else is
 * written stops short of `originHeadroomBytes` free, so billing always finds room to write: a
 * reservation, a settlement and a ledger entry are never refused for a full disk.
 */

/** How much of the origin's storage is used and allowed, as `navigator.storage.estimate()` says. */
export type StorageEstimator = () => Promise<{ usage?: number; quota?: number }>;

/** Room kept free in the origin's storage for reservations, settlements and the ledger. */
const originHeadroomBytes = 64 * 2 ** 20;

/** The browser's estimate, where it gives one (none in Node, where nothing is checked). */
export function browserEstimator(): StorageEstimator | undefined {
  const storage = (globalThis.navigator as { storage?: { estimate?: StorageEstimator } } | undefined)?.storage;
  return storage?.estimate ? () => storage.estimate!() : undefined;
}

/** Bytes as a person reads them: "12.3 MB". */
export const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(bytes < 1e6 ? 3 : 1)} MB`;

/**
 * Why `bytes` more would not fit (a sentence naming what is free, of what, and the headroom), or
 * null when they fit or the browser gives no estimate.
 */
export async function roomShortfall(estimate: StorageEstimator | undefined, bytes: number): Promise<string | null> {
  if (!estimate) return null;
  const { usage, quota } = await estimate();
  if (usage === undefined || quota === undefined) return null;
  if (quota - usage - bytes >= originHeadroomBytes) return null;
  return (
    `This device's storage for this site is nearly full: ${megabytes(Math.max(0, quota - usage))} is free of ${megabytes(quota)}, ` +
    `and ${megabytes(originHeadroomBytes)} is kept free for billing, so ${megabytes(bytes)} more could not be stored.`
  );
}
