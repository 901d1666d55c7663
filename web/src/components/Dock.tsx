import { Boxes, Brain, Gauge, MessageSquare, Moon, Settings, Sun, SunMoon, Scale, type LucideIcon } from "lucide-react";
import { followLink, usePage } from "../hooks/usePage";
import { pathOf, type Page } from "../lib/routes";
import { useSettings, type ThemePref } from "../stores/settings";
import { useConnection } from "../stores/connection";
import { Logo } from "./Logo";

export const DOCK: { page: Page; label: string; icon: LucideIcon }[] = [
  { page: "chat", label: "Chat", icon: MessageSquare },
  { page: "systemone", label: "System One", icon: Scale },
  { page: "brain", label: "Brain", icon: Brain },
  { page: "profiling", label: "Profiling", icon: Gauge },
  { page: "models", label: "Models", icon: Boxes },
  { page: "settings", label: "Settings", icon: Settings },
];

const NEXT_THEME: Record<ThemePref, ThemePref> = { system: "light", light: "dark", dark: "system" };
const THEME_ICON = { system: SunMoon, light: Sun, dark: Moon };

export function Dock() {
  const page = usePage();
  const theme = useSettings((s) => s.theme);
  const update = useSettings((s) => s.update);
  const status = useConnection((s) => s.status);
  const model = useConnection((s) => s.model);
  const ThemeIcon = THEME_ICON[theme];
  return (
    <nav className="dock" aria-label="Pages">
      <div className="dock-brand" title="colibri">
        <Logo size={30} />
      </div>
      <ul className="dock-items" role="list">
        {DOCK.map(({ page: p, label, icon: Icon }, i) => (
          <li key={p}>
            <a
              href={pathOf(p)}
              className="dock-btn"
              aria-current={page === p ? "page" : undefined}
              aria-label={label}
              title={`${label} (Alt+${i + 1})`}
              data-testid={`dock-${p}`}
              onClick={followLink(p)}
            >
              <Icon size={20} />
              <span className="dock-label">{label}</span>
            </a>
          </li>
        ))}
      </ul>
      <div className="dock-foot">
        <button
          type="button"
          className="dock-btn dock-theme"
          data-testid="theme-toggle"
          aria-label={`Theme: ${theme}. Switch to ${NEXT_THEME[theme]}`}
          title={`Theme: ${theme} (Alt+T)`}
          onClick={() => update({ theme: NEXT_THEME[theme] })}
        >
          <ThemeIcon size={18} />
        </button>
        <span
          className={`link-dot link-${status}`}
          role="status"
          data-testid="link-status"
          title={status === "online" ? `Connected${model ? ` · ${model}` : ""}` : status === "offline" ? "No server" : "Connecting…"}
          aria-label={status === "online" ? "Connected" : status === "offline" ? "Not connected" : "Connecting"}
        />
      </div>
    </nav>
  );
}
