// Server-sent events, as the WHATWG spec parses them, for fetch() bodies:
// an incremental parser (pure, tested) and an async generator over a stream.

export interface SSEEvent {
  event: string;
  data: string;
  id?: string;
}

/**
 * Incremental SSE parser: feed it text as it arrives, it returns the events
 * completed by that text. Lines end in \n, \r\n or \r; `:` lines are comments;
 * multi-line `data:` fields join with \n; an event without data is dropped.
 */
export class SSEParser {
  private buf = "";
  private data: string[] = [];
  private event = "";
  private id: string | undefined;
  private sawCR = false;

  push(chunk: string): SSEEvent[] {
    if (chunk === "") return [];
    let text = chunk;
    // A \r at the end of the previous chunk may be the first half of \r\n.
    if (this.sawCR && text.startsWith("\n")) text = text.slice(1);
    this.sawCR = text.endsWith("\r");
    this.buf += text;
    const out: SSEEvent[] = [];
    const re = /\r\n|\r|\n/g;
    let start = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(this.buf)) !== null) {
      // "\r" as the very last char could still become "\r\n": handled via sawCR.
      const line = this.buf.slice(start, m.index);
      start = m.index + m[0].length;
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  /** End of stream: a final event without its blank line is discarded, per spec. */
  end(): SSEEvent[] {
    this.buf = "";
    this.data = [];
    this.event = "";
    return [];
  }

  private line(line: string): SSEEvent | null {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return null;
      }
      const ev: SSEEvent = { event: this.event || "message", data: this.data.join("\n") };
      if (this.id !== undefined) ev.id = this.id;
      this.data = [];
      this.event = "";
      return ev;
    }
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
    return null;
  }
}

/** Reads SSE events from a byte stream (UTF-8), until it ends or the signal aborts. */
export async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const ev of parser.push(decoder.decode(value, { stream: true }))) yield ev;
    }
    for (const ev of parser.push(decoder.decode())) yield ev;
    parser.end();
  } finally {
    reader.releaseLock();
  }
}
