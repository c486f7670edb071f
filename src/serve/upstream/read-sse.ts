/**
 * An upstream's stream, read as a client reads one (src/http/sse.ts writes ours): server-sent
 * events as the spec frames them, whatever the sender's chunking. Lines end in LF, CRLF or CR;
 * `data:` lines of one event join with LF; comments and other fields are skipped. Yields each
 * event's data.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      // A trailing CR may be half of a CRLF still in flight.
      const lines = buffered.split(/\r\n|\n|\r(?!$)/);
      buffered = lines.pop() ?? "";
      for (const line of lines) {
        if (line === "") {
          if (data.length) yield data.join("\n");
          data = [];
        } else if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
      }
    }
    if (buffered.startsWith("data:")) data.push(buffered.slice(buffered.startsWith("data: ") ? 6 : 5));
    if (data.length) yield data.join("\n");
  } finally {
    reader.releaseLock();
  }
}
