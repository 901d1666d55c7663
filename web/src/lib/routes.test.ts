// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { basePath, pageAt, pageInHash, pathOf, PAGES, settleLocation } from "./routes";

const go = (url: string) => history.replaceState(null, "", url);
const here = () => `${location.pathname}${location.search}${location.hash}`;

describe("routes", () => {
  it("gives every page its own path, and reads each back", () => {
    expect(PAGES.map((p) => pathOf(p, "/"))).toEqual(["/chat", "/system-one", "/brain", "/profiling", "/models", "/settings"]);
    for (const p of PAGES) expect(pageAt(pathOf(p, "/"), "/")).toBe(p);
    expect(pageAt("/brain/", "/")).toBe("brain");
  });

  it("shows the default page at the base, and knows no other address", () => {
    expect(pageAt("/", "/")).toBe("chat");
    expect(pageAt("/index.html", "/")).toBe("chat");
    expect(pageAt("/nope", "/")).toBeNull();
    expect(pageAt("/brain/x", "/")).toBeNull();
    expect(pageAt("/Brain", "/")).toBeNull();
    expect(pageAt("/systemone", "/")).toBeNull();
  });

  it("respects a base path", () => {
    expect(basePath("/")).toBe("/");
    expect(basePath("/dash")).toBe("/dash/");
    expect(basePath("./")).toBe("/");
    expect(pathOf("brain", "/dash/")).toBe("/dash/brain");
    expect(pageAt("/dash/brain", "/dash/")).toBe("brain");
    expect(pageAt("/dash/", "/dash/")).toBe("chat");
    expect(pageAt("/dash", "/dash/")).toBe("chat");
    expect(pageAt("/brain", "/dash/")).toBeNull();
    expect(pageAt("/dashboard", "/dash/")).toBeNull();
  });

  it("reads the old #page addresses", () => {
    expect(pageInHash("#brain")).toBe("brain");
    expect(pageInHash("#/systemone")).toBe("systemone");
    expect(pageInHash("#main")).toBeNull();
    expect(pageInHash("")).toBeNull();
  });
});

describe("settleLocation", () => {
  it("turns an old /#brain into /brain, keeping the search", () => {
    go("/?x=1#profiling");
    settleLocation();
    expect(here()).toBe("/profiling?x=1");
  });

  it("sends an unknown address to the base", () => {
    go("/nope?x=1#main");
    settleLocation();
    expect(here()).toBe("/?x=1#main");
  });

  it("leaves a page's address and the base alone", () => {
    for (const url of ["/", "/brain", "/system-one?x=1", "/chat#main", "/brain#chat"]) {
      go(url);
      settleLocation();
      expect(here()).toBe(url);
    }
  });
});
