/**
 * The one request/reply helper for a page's messages to its worker: each request goes on a fresh
 * channel, and the replies that come back on it are read until one ends the exchange.
 */
import { SetupError } from "../../core/errors/setup.js";

/** Posts `message` to the controlling worker on a fresh channel; `onReply` sees each reply until it returns true. */
export function ask<Reply>(
  message: unknown,
  onReply: (reply: Reply) => boolean,
  timeoutMs?: number,
  onTimeout?: () => Error,
): Promise<void> {
  const worker = navigator.serviceWorker.controller;
  if (!worker) return Promise.reject(new SetupError("worker_unavailable", "no service worker controls this page."));
  const channel = new MessageChannel();
  return new Promise((resolve, reject) => {
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => reject(onTimeout?.()), timeoutMs);
    channel.port1.onmessage = (event: MessageEvent<Reply>) => {
      try {
        if (!onReply(event.data)) return;
        resolve();
      } catch (error) {
        reject(error as Error);
      }
      clearTimeout(timer);
      channel.port1.close();
    };
    worker.postMessage(message, [channel.port2]);
  });
}
