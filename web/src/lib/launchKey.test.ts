// @vitest-environment jsdom
import { describe, expect, it } from "vitest";
import { takeLaunchKey } from "./launchKey";

const go = (url: string) => history.replaceState(null, "", url);

describe("takeLaunchKey", () => {
  it("takes #key=… and leaves a clean address", () => {
    go("/#key=ab12");
    expect(takeLaunchKey()).toBe("ab12");
    expect(location.hash).toBe("");
    expect(location.href.includes("ab12")).toBe(false);
  });

  it("keeps the page part of the fragment", () => {
    go("/?x=1#brain&key=k%2Fy");
    expect(takeLaunchKey()).toBe("k/y");
    expect(location.hash).toBe("#brain");
    expect(location.search).toBe("?x=1");
    go("/#key=z&profiling");
    expect(takeLaunchKey()).toBe("z");
    expect(location.hash).toBe("#profiling");
  });

  it("is null, touching nothing, without a key", () => {
    go("/#chat");
    expect(takeLaunchKey()).toBeNull();
    expect(location.hash).toBe("#chat");
    go("/#monkey=1");
    expect(takeLaunchKey()).toBeNull();
    go("/#key=");
    expect(takeLaunchKey()).toBeNull();
  });
});
