import { describe, expect, it } from "vitest";
import { applyChunk, parseChunk, startStream, streamError, streamStats } from "./chatStream";
import type { ChatChunk } from "../api/types";

const delta = (d: ChatChunk["choices"][0]["delta"], finish: string | null = null): ChatChunk => ({ choices: [{ index: 0, delta: d, finish_reason: finish }] });

describe("stream assembly", () => {
  it("assembles the framing the server sends: role, reasoning, content, finish, usage, [DONE]", () => {
    const frames = [
      '{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}',
      '{"choices":[{"index":0,"delta":{"reasoning_content":"Think"},"finish_reason":null}],"usage":null}',
      '{"choices":[{"index":0,"delta":{"reasoning_content":"ing."},"finish_reason":null}],"usage":null}',
      '{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}],"usage":null}',
      '{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}],"usage":null}',
      '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}',
      '{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}',
      "[DONE]",
    ];
    let s = startStream(0);
    let t = 100;
    let done = false;
    for (const f of frames) {
      const c = parseChunk(f);
      if (c === "done") {
        done = true;
        break;
      }
      expect(c).not.toBeNull();
      s = applyChunk(s, c!, (t += 50));
    }
    expect(done).toBe(true);
    expect(s.reasoning).toBe("Thinking.");
    expect(s.content).toBe("Hello");
    expect(s.finish).toBe("stop");
    expect(s.usage?.completion_tokens).toBe(4);
    expect(s.pieces).toBe(4);
    const st = streamStats(s, 1000);
    expect(st.ttftMs).toBe(200); // first text at t=200
    expect(st.tokens).toBe(4);
    expect(st.exact).toBe(true);
    // 3 tokens after the first, between t=200 and t=350
    expect(st.tokPerS).toBeCloseTo(3 / 0.15, 5);
  });

  it("ignores keepalive chunks (empty reasoning) for timing", () => {
    let s = startStream(0);
    s = applyChunk(s, delta({ reasoning_content: "" }), 10);
    expect(s.firstAt).toBeNull();
    s = applyChunk(s, delta({ content: "x" }), 20);
    expect(s.firstAt).toBe(20);
  });

  it("continues from existing text", () => {
    let s = startStream(0, "Once upon");
    s = applyChunk(s, delta({ content: " a time" }), 5);
    expect(s.content).toBe("Once upon a time");
  });

  it("rejects garbage and non-array choices", () => {
    expect(parseChunk("not json")).toBeNull();
    expect(parseChunk('{"choices":5}')).toBeNull();
    expect(parseChunk("42")).toBeNull();
    expect(parseChunk(" [DONE] ")).toBe("done");
    expect(parseChunk('{"usage":null}')).toEqual({ usage: null, choices: [] });
  });

  it("reports no rate before two tokens and estimates tokens from pieces before usage", () => {
    let s = startStream(0);
    s = applyChunk(s, delta({ content: "a" }), 100);
    expect(streamStats(s, 200)).toEqual({ ttftMs: 100, tokPerS: null, tokens: 1, exact: false });
    s = applyChunk(s, delta({ content: "b" }), 300);
    expect(streamStats(s, 600).tokPerS).toBeCloseTo(1 / 0.5); // still streaming: measured to now
  });
});

describe("an error event mid-stream", () => {
  it("names the server's message and code; ordinary chunks and [DONE] are not errors", () => {
    const ev = JSON.stringify({ error: { message: "upstream http://a:1 broke its stream", type: "server_error", code: "upstream_stream_broken" } });
    expect(streamError(ev)).toBe("upstream http://a:1 broke its stream (upstream_stream_broken)");
    expect(streamError(JSON.stringify({ error: { message: "engine failed" } }))).toBe("engine failed");
    expect(streamError(JSON.stringify({ error: {} }))).toBe("the server failed mid-reply");
    expect(streamError(JSON.stringify({ choices: [{ index: 0, delta: { content: "hi" }, finish_reason: null }] }))).toBeNull();
    expect(streamError("[DONE]")).toBeNull();
    expect(streamError("not json")).toBeNull();
  });
});
