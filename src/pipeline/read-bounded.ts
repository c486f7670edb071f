/**
 * A body read up to a bound: a client's request or an upstream's reply is input like any other,
 * and one that never ends must not fill the worker's memory. The chunks are joined here: a Blob to
 * join them would cost a round trip to the browser's blob store on every request.
 */

/** The body's bytes, its first `limit` at most; `cut` when there was more (the rest is not read). */
export async function readBoundedBytes(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<{ bytes: Uint8Array; cut: boolean }> {
  if (!body) return { bytes: new Uint8Array(0), cut: false };
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let cut = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const room = limit - size;
    if (value.byteLength > room) {
      chunks.push(value.subarray(0, room));
      size = limit;
      cut = true;
      await reader.cancel().catch(() => undefined);
      break;
    }
    chunks.push(value);
    size += value.byteLength;
  }
  if (chunks.length === 1) return { bytes: chunks[0]!, cut };
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { bytes, cut };
}

/** The body's text (UTF-8), its first `limit` bytes at most; `cut` when there was more. */
export async function readBounded(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<{ text: string; cut: boolean }> {
  const { bytes, cut } = await readBoundedBytes(body, limit);
  return { text: new TextDecoder().decode(bytes), cut };
}
