import { describe, expect, it } from "vitest";
import { readSSE, SSEParser } from "./sse";

describe("SSEParser", () => {
  it("parses data events separated by blank lines", () => {
    const p = new SSEParser();
    expect(p.push('data: {"a":1}\n\ndata: [DONE]\n\n')).toEqual([
      { event: "message", data: '{"a":1}' },
      { event: "message", data: "[DONE]" },
    ]);
  });

  it("keeps an event split across chunks, anywhere", () => {
    const text = 'data: {"choices":[{"delta":{"content":"héllo"}}]}\n\n';
    for (let cut = 1; cut < text.length; cut++) {
      const p = new SSEParser();
      const evs = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
      expect(evs).toHaveLength(1);
      expect(JSON.parse(evs[0].data).choices[0].delta.content).toBe("héllo");
    }
  });

  it("accepts CRLF and CR line ends, also split between chunks", () => {
    const p = new SSEParser();
    expect([...p.push("data: a\r"), ...p.push("\n\r\n"), ...p.push("data: b\r\r")]).toEqual([
      { event: "message", data: "a" },
      { event: "message", data: "b" },
    ]);
  });

  it("joins multi-line data, reads event and id, skips comments and empty events", () => {
    const p = new SSEParser();
    expect(p.push(": keepalive\n\nevent: ping\nid: 7\ndata: one\ndata:two\n\n")).toEqual([{ event: "ping", data: "one\ntwo", id: "7" }]);
  });

  it("drops an unterminated event at end of stream", () => {
    const p = new SSEParser();
    expect(p.push("data: partial")).toEqual([]);
    expect(p.end()).toEqual([]);
  });

  it("strips exactly one space after the colon; a field without colon has an empty value", () => {
    const p = new SSEParser();
    expect(p.push("data:  two spaces\n\ndata\n\n")).toEqual([
      { event: "message", data: " two spaces" },
      { event: "message", data: "" },
    ]);
  });
});

describe("readSSE", () => {
  it("decodes UTF-8 split inside a code point", async () => {
    const bytes = new TextEncoder().encode("data: 日本\n\ndata: [DONE]\n\n");
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes.slice(0, 8)); // cuts 日 in half
        c.enqueue(bytes.slice(8));
        c.close();
      },
    });
    const out: string[] = [];
    for await (const ev of readSSE(body)) out.push(ev.data);
    expect(out).toEqual(["日本", "[DONE]"]);
  });
});
