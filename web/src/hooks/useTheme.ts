// Light or dark: the system's choice unless the user picked one. Sets
// data-theme on <html>; CSS does the rest.
import { useEffect, useState } from "react";
import { useSettings } from "../stores/settings";

function systemDark(): boolean {
  return globalThis.matchMedia?.("(prefers-color-scheme: dark)").matches ?? false;
}

export function useResolvedTheme(): "light" | "dark" {
  const pref = useSettings((s) => s.theme);
  const [dark, setDark] = useState(systemDark);
  useEffect(() => {
    const mq = globalThis.matchMedia?.("(prefers-color-scheme: dark)");
    if (!mq) return;
    const on = () => setDark(mq.matches);
    mq.addEventListener("change", on);
    return () => mq.removeEventListener("change", on);
  }, []);
  const theme = pref === "system" ? (dark ? "dark" : "light") : pref;
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    document.documentElement.style.colorScheme = theme;
  }, [theme]);
  return theme;
}
