// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { highlight, renderMarkdown } from "./markdown";

describe("markdown", () => {
  it("renders GFM and highlights fenced code", () => {
    const html = renderMarkdown("# Hi\n\n- a\n- b\n\n```python\ndef f(x):\n    return 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |");
    expect(html).toContain("<h1>Hi</h1>");
    expect(html).toContain("<li>a</li>");
    expect(html).toContain('<span class="hljs-keyword">def</span>');
    expect(html).toContain('<span class="code-lang">python</span>');
    expect(html).toContain("<table>");
    expect(html).toContain('class="code-copy"');
  });

  it("removes scripts and event handlers from model output", () => {
    const html = renderMarkdown('hello <script>alert(1)</script><img src=x onerror="alert(2)"> [x](javascript:alert(3))');
    expect(html).not.toContain("<script");
    expect(html).not.toContain("onerror");
    expect(html).not.toContain("javascript:");
  });

  it("opens links in a new tab", () => {
    expect(renderMarkdown("[colibri](https://example.com)")).toContain('target="_blank"');
  });

  it("escapes code in unknown languages", () => {
    expect(highlight("<b>&</b>", "klingon")).toBe("&lt;b&gt;&amp;&lt;/b&gt;");
  });
});
