import { KeyRound } from "lucide-react";
import { useAuth } from "../stores/auth";
import { useConnection } from "../stores/connection";
import { EmptyState } from "./EmptyState";

/** True when /health answered in its reduced form: the server has a key and this tab has none. */
export function useKeyNeeded(): boolean {
  const health = useConnection((s) => s.health);
  const key = useAuth((s) => s.key);
  return !key && health !== null && health.model === undefined && health.arch === undefined;
}

export function KeyNeeded({ what }: { what: string }) {
  const requireKey = useAuth((s) => s.requireKey);
  return (
    <EmptyState icon={<KeyRound size={28} />} title="This server asks for its API key" testId="key-needed">
      <p>Without the key the server shares only that it is up; {what} need the key.</p>
      <button type="button" className="btn primary" onClick={() => requireKey()}>
        Enter the key
      </button>
    </EmptyState>
  );
}
