import { describe, expect, it } from "vitest";
import { conversationToJSON, conversationToMarkdown, exportFileName } from "./exportChat";
import type { Conversation } from "../../stores/conversations";

const conv: Conversation = {
  id: "c1",
  title: "Routing, explained",
  createdAt: Date.UTC(2025, 0, 2, 3, 4, 5),
  updatedAt: Date.UTC(2025, 0, 2, 3, 5, 0),
  model: "qwen3-30b-a3b",
  messages: [
    { id: "1", role: "user", content: "What is top-k routing?  " },
    { id: "2", role: "assistant", content: "Each token picks **k** experts.\n\n```py\ntopk(x, 8)\n```", reasoning: "The user asks…", stats: { ttftMs: 120, tokPerS: 21.5, tokens: 14, finish: "stop" } },
  ],
};

describe("export", () => {
  it("Markdown: title, meta, one section per turn, reasoning folded", () => {
    const md = conversationToMarkdown(conv);
    expect(md).toBe(
      [
        "# Routing, explained",
        "",
        "_Model: qwen3-30b-a3b · Created: 2025-01-02T03:04:05.000Z_",
        "",
        "## User",
        "",
        "What is top-k routing?",
        "",
        "## Assistant",
        "",
        "<details><summary>Reasoning</summary>",
        "",
        "The user asks…",
        "",
        "</details>",
        "",
        "Each token picks **k** experts.",
        "",
        "```py",
        "topk(x, 8)",
        "```",
        "",
      ].join("\n"),
    );
  });

  it("JSON: OpenAI-style messages with reasoning_content and stats", () => {
    const j = JSON.parse(conversationToJSON(conv));
    expect(j.title).toBe("Routing, explained");
    expect(j.model).toBe("qwen3-30b-a3b");
    expect(j.messages).toEqual([
      { role: "user", content: "What is top-k routing?  " },
      { role: "assistant", content: conv.messages[1].content, reasoning_content: "The user asks…", stats: conv.messages[1].stats },
    ]);
  });

  it("file names are safe slugs", () => {
    expect(exportFileName("Routing, explained", "md")).toBe("routing-explained.md");
    expect(exportFileName("  ../..//  ", "json")).toBe("conversation.json");
    expect(exportFileName("Überblick: 日本語 OK?", "md")).toBe("uberblick-日本語-ok.md");
  });
});
