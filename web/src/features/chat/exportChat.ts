// A conversation as a file: Markdown for reading, JSON for machines. Pure.

import type { Conversation } from "../../stores/conversations";

export function conversationToMarkdown(c: Conversation): string {
  const lines: string[] = [`# ${c.title || "Conversation"}`, ""];
  const meta = [c.model ? `Model: ${c.model}` : "", `Created: ${new Date(c.createdAt).toISOString()}`].filter(Boolean);
  lines.push(`_${meta.join(" · ")}_`, "");
  for (const m of c.messages) {
    const who = m.role === "user" ? "User" : m.role === "assistant" ? "Assistant" : "System";
    lines.push(`## ${who}`, "");
    if (m.reasoning) {
      lines.push("<details><summary>Reasoning</summary>", "", m.reasoning.trim(), "", "</details>", "");
    }
    if (m.images?.length) lines.push(`_${m.images.length} image(s) attached_`, "");
    lines.push(m.content.trim(), "");
  }
  return lines.join("\n").replace(/\n{3,}/g, "\n\n").trimEnd() + "\n";
}

export function conversationToJSON(c: Conversation): string {
  return (
    JSON.stringify(
      {
        title: c.title,
        model: c.model ?? null,
        created: new Date(c.createdAt).toISOString(),
        messages: c.messages.map((m) => {
          const o: Record<string, unknown> = { role: m.role, content: m.content };
          if (m.reasoning) o.reasoning_content = m.reasoning;
          if (m.images?.length) o.images = m.images.length;
          if (m.stats) o.stats = m.stats;
          return o;
        }),
      },
      null,
      2,
    ) + "\n"
  );
}

/** A file name from a title: lowercase words joined by dashes, safe on every OS. */
export function exportFileName(title: string, ext: "md" | "json"): string {
  const slug =
    title
      .toLowerCase()
      .normalize("NFKD")
      .replace(/\p{Mark}+/gu, "")
      .replace(/[^\p{Letter}\p{Number}]+/gu, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 60) || "conversation";
  return `${slug}.${ext}`;
}
