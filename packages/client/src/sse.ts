// A server-sent events reader (the gateway's `GET /v1/tasks/:id/events`): the fields of the
// WHATWG event stream format that the gateway writes (event, data, id; comments ignored).

export interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/** Feed it text as it arrives; it returns the events each chunk completed. */
export function createSseParser(): { push(chunk: string): SseEvent[] } {
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  const line = (l: string, out: SseEvent[]) => {
    if (l === "") {
      if (data.length) out.push({ event: event || "message", data: data.join("\n"), id });
      event = "";
      data = [];
      return;
    }
    if (l.startsWith(":")) return;
    const colon = l.indexOf(":");
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? "" : l.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id" && !value.includes("\0")) id = value;
  };
  return {
    push(chunk) {
      buffer += chunk;
      const out: SseEvent[] = [];
      for (let nl = buffer.search(/\r\n|\r|\n/); nl >= 0; nl = buffer.search(/\r\n|\r|\n/)) {
        // A lone \r at the end may be the first half of \r\n: wait for the next chunk.
        if (buffer[nl] === "\r" && nl === buffer.length - 1) break;
        const len = buffer.startsWith("\r\n", nl) ? 2 : 1;
        line(buffer.slice(0, nl), out);
        buffer = buffer.slice(nl + len);
      }
      return out;
    },
  };
}

/** The events of a response body, as they arrive. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const parser = createSseParser();
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}
