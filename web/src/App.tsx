import { lazy, Suspense, useEffect } from "react";
import { Dock, DOCK } from "./components/Dock";
import { KeyDialog } from "./components/KeyDialog";
import { ErrorBoundary } from "./components/ErrorBoundary";
import { goTo, usePage } from "./hooks/usePage";
import { useServerPolling } from "./hooks/useServerPolling";
import { useResolvedTheme } from "./hooks/useTheme";
import { useSettings, type ThemePref } from "./stores/settings";
import { useConnection } from "./stores/connection";
import { ChatPage } from "./features/chat";
import { SystemOnePage } from "./features/system-one";
import { SettingsPage } from "./features/settings";

// Brain and Profiling carry the canvas and chart code: loaded when opened.
const BrainPage = lazy(() => import("./features/brain"));
const ProfilingPage = lazy(() => import("./features/profiling"));
const ModelsPage = lazy(() => import("./features/models"));

const NEXT_THEME: Record<ThemePref, ThemePref> = { system: "light", light: "dark", dark: "system" };

export function App() {
  useResolvedTheme();
  useServerPolling();
  const page = usePage();
  const apiBase = useSettings((s) => s.apiBase);
  useEffect(() => useConnection.getState().setBase(apiBase), [apiBase]);

  // Alt+1..6 switch pages, Alt+T cycles the theme.
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (!e.altKey || e.ctrlKey || e.metaKey) return;
      // e.code, not e.key: Alt+digit types a symbol on some keyboards (macOS).
      const n = /^Digit[1-9]$/.test(e.code) ? Number(e.code.slice(5)) : Number.NaN;
      if (n >= 1 && n <= DOCK.length) {
        e.preventDefault();
        goTo(DOCK[n - 1].page);
      } else if (e.code === "KeyT") {
        e.preventDefault();
        const s = useSettings.getState();
        s.update({ theme: NEXT_THEME[s.theme] });
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  return (
    <div className="app">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <Dock />
      <main id="main" className="main" data-page={page} tabIndex={-1}>
        <ErrorBoundary resetKey={page}>
          <Suspense fallback={<div className="page-loading" aria-busy="true" />}>
            {page === "chat" && <ChatPage />}
            {page === "systemone" && <SystemOnePage />}
            {page === "brain" && <BrainPage />}
            {page === "profiling" && <ProfilingPage />}
            {page === "models" && <ModelsPage />}
            {page === "settings" && <SettingsPage />}
          </Suspense>
        </ErrorBoundary>
      </main>
      <KeyDialog />
    </div>
  );
}
