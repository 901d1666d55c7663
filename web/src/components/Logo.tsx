export function Logo({ size = 28 }: { size?: number }) {
  return (
    <svg width={size} height={size} viewBox="0 0 32 32" aria-hidden="true" className="logo">
      <rect width="32" height="32" rx="9" className="logo-bg" />
      <path d="M7 19c4-1 7-4 9-9 1 3 3 5 6 5l3-2-2 4c-2 3-6 5-10 5-2 0-4-1-6-3z" className="logo-bird" />
      <circle cx="21.5" cy="13.2" r="1.1" className="logo-bg" />
    </svg>
  );
}
