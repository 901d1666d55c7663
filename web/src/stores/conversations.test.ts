// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { titleFrom, useConversations } from "./conversations";

describe("conversations store", () => {
  it("creates, titles from the first user message, patches, persists and removes", () => {
    const s = useConversations.getState();
    const id = s.create();
    expect(useConversations.getState().activeId).toBe(id);
    s.setMessages(id, [{ id: "m1", role: "user", content: "How do experts get picked?" }, { id: "m2", role: "assistant", content: "" }], "m");
    s.patchMessage(id, "m2", { content: "By the router." });
    s.flush();
    const c = useConversations.getState().list.find((x) => x.id === id)!;
    expect(c.title).toBe("How do experts get picked?");
    expect(c.messages[1].content).toBe("By the router.");
    expect(JSON.parse(localStorage.getItem("colibri.conversations")!)[0].messages[1].content).toBe("By the router.");
    s.remove(id);
    expect(useConversations.getState().list.find((x) => x.id === id)).toBeUndefined();
  });

  it("titles are short and single-line", () => {
    expect(titleFrom("  a\nb  ")).toBe("a b");
    expect(titleFrom("x".repeat(80))).toHaveLength(48);
    expect(titleFrom("")).toBe("New conversation");
  });
});
