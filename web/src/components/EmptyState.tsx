import type { ReactNode } from "react";

/** A calm explanation where data would be: what is missing and what to do. */
export function EmptyState({ icon, title, children, testId }: { icon?: ReactNode; title: string; children?: ReactNode; testId?: string }) {
  return (
    <div className="empty" data-testid={testId}>
      {icon && <div className="empty-icon">{icon}</div>}
      <h3>{title}</h3>
      {children && <div className="empty-body">{children}</div>}
    </div>
  );
}
