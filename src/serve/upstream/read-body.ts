/**
 * An upstream's body, read up to a bound: a reply is input like any other, and one that never
 * ends must not fill the worker's memory.
 */

/** The body's text, its first `limit` bytes at most; `cut` when there was more (the rest is not read). */
export async function readBounded(response: Response, limit: number): Promise<{ text: string; cut: boolean }> {
  if (!response.body) return { text: "", cut: false };
  const reader = response.body.getReader();
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
