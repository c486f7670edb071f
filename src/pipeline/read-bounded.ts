/**
 * A body read up to a bound: a client's request or an upstream's reply is input like any other,
 * and one that never ends must not fill the worker's memory. Decoded as it streams: a Blob to
 * join the chunks would cost a round trip to the browser's blob store on every request.
 */

/** The body's text, its first `limit` bytes at most; `cut` when there was more (the rest is not read). */
export async function readBounded(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<{ text: string; cut: boolean }> {
  if (!body) return { text: "", cut: false };
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { text: text + decoder.decode(), cut: false };
    const room = limit - size;
    size += value.byteLength;
    if (value.byteLength > room) {
      text += decoder.decode(value.subarray(0, room));
      await reader.cancel().catch(() => undefined);
      return { text, cut: true };
    }
    text += decoder.decode(value, { stream: true });
  }
}
