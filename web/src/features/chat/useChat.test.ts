import { describe, expect, it } from "vitest";
import { buildRequest } from "./useChat";

describe("chat request", () => {
  const base = { systemPrompt: "", temperature: 0.7, maxTokens: 4096, slot: null, thinking: null };

  it("streams with usage, sends only what the server supports", () => {
    const r = buildRequest("m", [{ id: "1", role: "user", content: "hi" }], base);
    expect(r).toEqual({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.7,
      max_completion_tokens: 4096,
    });
  });

  it("adds the system prompt, enable_thinking and cache_slot when asked", () => {
    const r = buildRequest("m", [{ id: "1", role: "user", content: "hi" }], { ...base, systemPrompt: " Be brief. ", slot: 2, thinking: true });
    expect(r.messages[0]).toEqual({ role: "system", content: "Be brief." });
    expect(r.enable_thinking).toBe(true);
    expect(r.cache_slot).toBe(2);
  });

  it("sends images as content parts and skips failed empty answers", () => {
    const r = buildRequest(
      "m",
      [
        { id: "1", role: "user", content: "what is this?", images: ["data:image/png;base64,AA=="] },
        { id: "2", role: "assistant", content: "", error: "boom" },
      ],
      base,
    );
    expect(r.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } }] },
    ]);
  });

  it("a trailing assistant turn is sent as is (the server continues it)", () => {
    const r = buildRequest("m", [{ id: "1", role: "user", content: "count" }, { id: "2", role: "assistant", content: "1, 2," }], base);
    expect(r.messages[1]).toEqual({ role: "assistant", content: "1, 2," });
  });
});
