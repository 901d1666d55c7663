// @vitest-environment jsdom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { pathOf, type Page } from "../lib/routes";
import { followLink, goTo, usePage } from "./usePage";

declare global {
  var IS_REACT_ACT_ENVIRONMENT: boolean | undefined;
}

let shown: Page[] = [];
function Shows() {
  shown.push(usePage());
  return (
    <a href={pathOf("brain")} onClick={followLink("brain")}>
      Brain
    </a>
  );
}

let root: Root;
let host: HTMLDivElement;
beforeEach(async () => {
  globalThis.IS_REACT_ACT_ENVIRONMENT = true;
  history.replaceState(null, "", "/");
  shown = [];
  host = document.createElement("div");
  document.body.append(host);
  root = createRoot(host);
  await act(() => root.render(<Shows />));
});
afterEach(() => {
  act(() => root.unmount());
  host.remove();
});

const last = () => shown[shown.length - 1];
/** Clicks the link; says whether the app kept the browser from following it. */
const click = (init: MouseEventInit) => {
  let prevented = false;
  // Last in line (after React's listener on the root): note the app's verdict, then keep jsdom from navigating.
  const note = (e: Event) => {
    prevented = e.defaultPrevented;
    e.preventDefault();
  };
  document.addEventListener("click", note);
  act(() => void host.querySelector("a")!.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true, ...init })));
  document.removeEventListener("click", note);
  return prevented;
};

describe("usePage", () => {
  it("shows the page of the address and follows goTo with a new history entry", () => {
    expect(last()).toBe("chat");
    const entries = history.length;
    act(() => goTo("profiling"));
    expect(location.pathname).toBe("/profiling");
    expect(last()).toBe("profiling");
    expect(history.length).toBe(entries + 1);
    act(() => goTo("profiling")); // already there: no second entry
    expect(history.length).toBe(entries + 1);
  });

  it("follows back and forward (popstate)", () => {
    history.replaceState(null, "", "/settings");
    act(() => void window.dispatchEvent(new PopStateEvent("popstate")));
    expect(last()).toBe("settings");
    history.replaceState(null, "", "/nowhere");
    act(() => void window.dispatchEvent(new PopStateEvent("popstate")));
    expect(last()).toBe("chat");
  });

  it("switches in place on a plain click of a page link", () => {
    expect(click({ button: 0 })).toBe(true);
    expect(location.pathname).toBe("/brain");
    expect(last()).toBe("brain");
  });

  it("leaves a middle click or one with a modifier key to the browser (a new tab)", () => {
    for (const init of [{ button: 1 }, { button: 0, ctrlKey: true }, { button: 0, metaKey: true }, { button: 0, shiftKey: true }]) {
      expect(click(init)).toBe(false);
      expect(location.pathname).toBe("/");
    }
    expect(last()).toBe("chat");
  });
});
