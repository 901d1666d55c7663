import { useMemo, useRef } from "react";
import uPlot from "uplot";
import { Activity, CloudOff, Cpu, HardDrive, Timer } from "lucide-react";
import { parseProfile, turnAcceptance, turnPhases, turnTokPerS, turnTokensPerStep } from "../../api/feeds";
import type { Drafter, GatewayTurn, Health, ProfileTurn } from "../../api/types";
import { EmptyState } from "../../components/EmptyState";
import { KeyNeeded, useKeyNeeded } from "../../components/KeyNeeded";
import { UChart } from "../../components/UChart";
import { useFeed } from "../../hooks/useFeed";
import { useResolvedTheme } from "../../hooks/useTheme";
import { fmtBytes, fmtGB, fmtInt, fmtPct, fmtRate, fmtSec } from "../../lib/format";
import { useConnection } from "../../stores/connection";

export const PROFILE_MS = 2000;
const HISTORY = 30;

export const PHASES = [
  { key: "wait", label: "I/O wait", color: "#e0a458" },
  { key: "matmul", label: "Expert matmul", color: "#4ed6a5" },
  { key: "attention", label: "Attention", color: "#5a9bd8" },
  { key: "linear", label: "Linear attention", color: "#5ac8d8" },
  { key: "head", label: "LM head", color: "#a78bdb" },
  { key: "other", label: "Other", color: "#8a969c" },
] as const;

/** What drafted a turn's tokens (ProfileTurn.drafter), in words. */
export const DRAFTER_NAMES: Record<Drafter, string> = { mtp: "MTP block", lookup: "prompt lookup", model: "draft model" };

export default function ProfilingPage() {
  const { data, settled, missing } = useFeed("profile", parseProfile, PROFILE_MS);
  const health = useConnection((s) => s.health);
  const status = useConnection((s) => s.status);
  const turns = data?.turns ?? [];
  const last = turns[turns.length - 1];
  const keyNeeded = useKeyNeeded();

  let main: React.ReactNode;
  if (keyNeeded && !last) main = <KeyNeeded what="the turns and their timings" />;
  else if (!settled) main = <div className="page-loading" aria-busy="true" />;
  else if (!data)
    main = missing ? (
      <EmptyState icon={<Activity size={28} />} title="No profiling feed on this server" testId="profiling-empty">
        <p>
          The server answered, but does not publish <code>/profile</code>. colibri's <code>coli serve</code> does; other OpenAI-compatible
          servers don't.
        </p>
      </EmptyState>
    ) : (
      <EmptyState icon={<CloudOff size={28} />} title={status === "offline" ? "No server" : "Waiting for the server"} testId="profiling-empty">
        <p>Profiling shows where every millisecond of a turn goes. Start <code>coli serve</code> and send a message.</p>
      </EmptyState>
    );
  else if (data.gateway) main = <Gateway turns={data.gateway.slice(-HISTORY)} health={health} />;
  else if (!last)
    main = (
      <EmptyState icon={<Timer size={28} />} title="No turns yet" testId="profiling-empty">
        <p>Send a message in Chat: each answer appears here as a bar of I/O wait, expert matmul, attention, linear attention (hybrid models), LM head and the rest.</p>
      </EmptyState>
    );
  else
    main = (
      <>
        <TurnCard t={last} />
        <History turns={turns.slice(-HISTORY)} />
      </>
    );

  return (
    <div className="page profiling" data-testid="page-profiling">
      <header className="page-head">
        <div>
          <h1>Profiling</h1>
          <p className="muted">Where the time of each turn goes, and where the experts live.</p>
        </div>
      </header>
      <div className="prof-grid">
        <div className="prof-main">{main}</div>
        <Machine health={health} />
      </div>
    </div>
  );
}

const ms = (s: number | null) => (s === null ? "–" : `${(s * 1000).toFixed(s < 0.1 ? 1 : 0)} ms`);

/** `coli serve --upstream`: the engines are elsewhere; what the gateway measures per request, and the upstreams. */
function Gateway({ turns, health }: { turns: GatewayTurn[]; health: Health | null }) {
  const ups = health?.upstreams ?? [];
  return (
    <>
      <section className="card" aria-labelledby="ups-title" data-testid="profile-upstreams">
        <h2 id="ups-title">Upstreams</h2>
        <p className="small muted">The engines behind this gateway; their own phases are not visible from here.</p>
        <table className="prof-table">
          <thead>
            <tr><th>upstream</th><th>state</th><th>running</th><th>requests</th><th>errors</th></tr>
          </thead>
          <tbody>
            {ups.map((u) => (
              <tr key={u.url} title={u.last_error ?? undefined}>
                <td>{u.url}</td><td>{u.state}</td><td>{u.in_flight}</td><td>{u.requests}</td><td>{u.errors}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      <section className="card" aria-labelledby="gw-title" data-testid="profile-gateway">
        <h2 id="gw-title">Requests at the gateway</h2>
        {turns.length === 0 ? (
          <p className="small muted">No requests yet: send a message in Chat.</p>
        ) : (
          <table className="prof-table">
            <thead>
              <tr><th>upstream</th><th>queue wait</th><th>first token</th><th>per token</th><th>total</th><th>tokens</th><th>end</th></tr>
            </thead>
            <tbody>
              {turns.slice().reverse().map((t) => (
                <tr key={t.id}>
                  <td>{t.upstream}</td><td>{ms(t.queue_wait_s)}</td><td>{ms(t.first_output_s)}</td><td>{ms(t.inter_token_s)}</td>
                  <td>{ms(t.wall_s)}</td><td>{t.completion_tokens}</td><td>{t.finish}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  );
}

function TurnCard({ t }: { t: ProfileTurn }) {
  const ph = turnPhases(t);
  const perStep = turnTokensPerStep(t);
  const drafter = t.drafter ? DRAFTER_NAMES[t.drafter] : null;
  const total = Math.max(t.wall_s, 1e-9);
  return (
    <section className="card" aria-labelledby="turn-title" data-testid="profile-turn">
      <div className="card-head">
        <h2 id="turn-title">Last turn</h2>
        <span className="small muted">
          #{t.id} · slot {t.slot} · {fmtInt(t.prompt_tokens)} prompt + {fmtInt(t.completion_tokens)} generated tokens
        </span>
      </div>
      <div className="kpis">
        <Kpi label="tok/s" value={fmtRate(turnTokPerS(t))} hint="completion ÷ wall, prefill included" />
        <Kpi label="wall" value={fmtSec(t.wall_s)} />
        <Kpi label="prefill" value={fmtSec(t.prefill_s)} />
        <Kpi label="read from disk" value={fmtBytes(t.bytes_read)} />
        <Kpi label="cache hits" value={fmtPct(t.cache_hit_rate)} />
        <Kpi
          label="experts predicted"
          value={fmtPct(t.prefetch_hit_rate)}
          hint="chosen experts the one-layer-ahead prediction had named"
        />
        {perStep !== null && (
          <Kpi
            label="tokens / step"
            value={perStep.toFixed(2)}
            hint={`${drafter ?? "speculative decoding"}: ${fmtInt(t.draft_accepted ?? 0)} of ${fmtInt(t.draft_tokens ?? 0)} drafted tokens kept`}
            sub={`${drafter ? `${drafter} · ` : ""}${fmtPct(turnAcceptance(t))}\u00a0kept`}
          />
        )}
      </div>
      <div className="stack" role="img" aria-label={PHASES.map((p) => `${p.label} ${fmtSec(ph[p.key])}`).join(", ")}>
        {PHASES.map((p) => (
          <span key={p.key} className="stack-seg" style={{ width: `${(ph[p.key] / total) * 100}%`, background: p.color }} title={`${p.label}: ${fmtSec(ph[p.key])}`} />
        ))}
      </div>
      <div className="stack disk" role="img" aria-label={`Disk service time ${fmtSec(t.expert_disk_s)}`}>
        <span className="stack-seg" style={{ width: `${Math.min(100, (t.expert_disk_s / total) * 100)}%` }} />
      </div>
      <ul className="stack-legend" role="list">
        {PHASES.map((p) => (
          <li key={p.key}>
            <span className="swatch" style={{ background: p.color }} /> {p.label} <strong>{fmtSec(ph[p.key])}</strong>
          </li>
        ))}
        <li title="Time the disk spent serving expert reads. It overlaps compute, so it is not part of the stack.">
          <span className="swatch disk-swatch" /> Disk service <strong>{fmtSec(t.expert_disk_s)}</strong>
          <span className="muted"> (overlaps compute)</span>
        </li>
      </ul>
    </section>
  );
}

function Kpi({ label, value, hint, sub }: { label: string; value: string; hint?: string; sub?: string }) {
  return (
    <div className="kpi" title={hint}>
      <span className="kpi-value">{value}</span>
      <span className="kpi-label">{label}</span>
      {sub && <span className="kpi-sub">{sub}</span>}
    </div>
  );
}

function axisColors(theme: "light" | "dark") {
  return theme === "dark" ? { stroke: "#8d999e", grid: "rgba(255,255,255,0.06)" } : { stroke: "#6b7479", grid: "rgba(0,0,0,0.06)" };
}

function History({ turns }: { turns: ProfileTurn[] }) {
  const theme = useResolvedTheme();
  const stacked = useMemo(() => {
    const phases = turns.map(turnPhases);
    const cum: number[][] = [];
    let acc = turns.map(() => 0);
    for (const p of PHASES) {
      acc = acc.map((a, i) => a + phases[i][p.key]);
      cum.push(acc.slice());
    }
    return cum;
  }, [turns]);
  const phaseData = useMemo<uPlot.AlignedData>(() => [turns.map((_, i) => i + 1), ...stacked.slice().reverse()], [turns, stacked]);
  const rateData = useMemo<uPlot.AlignedData>(() => [turns.map((_, i) => i + 1), turns.map(turnTokPerS)], [turns]);
  // Turn ids for the x axis, read through a ref so the chart options stay stable between polls.
  const ids = useRef<number[]>([]);
  ids.current = turns.map((t) => t.id);
  const axes = useMemo<uPlot.Axis[]>(() => {
    const colors = axisColors(theme);
    return [
      { stroke: colors.stroke, grid: { stroke: colors.grid }, ticks: { show: false }, values: (_u, v) => v.map((x) => (Number.isInteger(x) ? String(ids.current[x - 1] ?? "") : "")) },
      { stroke: colors.stroke, grid: { stroke: colors.grid }, ticks: { show: false }, size: 48 },
    ];
  }, [theme]);
  const phaseOpts = useMemo<Omit<uPlot.Options, "width" | "height">>(
    () => ({
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false, range: (_u, lo, hi) => [lo - 0.6, hi + 0.6] }, y: { range: (_u, _lo, hi) => [0, hi * 1.08 || 1] } },
      axes: [axes[0], { ...axes[1], values: (_u, v) => v.map((s) => fmtSec(s)) }],
      series: [
        {},
        ...PHASES.slice()
          .reverse()
          .map((p) => ({ label: p.label, stroke: p.color, fill: p.color, width: 0, paths: uPlot.paths.bars!({ size: [0.65, 28], gap: 2 }), points: { show: false } })),
      ],
    }),
    [axes],
  );
  const rateOpts = useMemo<Omit<uPlot.Options, "width" | "height">>(
    () => ({
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: false, range: (_u, lo, hi) => [lo - 0.6, hi + 0.6] }, y: { range: (_u, _lo, hi) => [0, hi * 1.15 || 1] } },
      axes: [axes[0], axes[1]],
      series: [{}, { label: "tok/s", stroke: "#4ed6a5", width: 2, fill: "rgba(78,214,165,0.12)", points: { show: true, size: 5 } }],
    }),
    [axes],
  );
  return (
    <section className="card" aria-labelledby="hist-title" data-testid="profile-history">
      <div className="card-head">
        <h2 id="hist-title">Last {turns.length} turns</h2>
      </div>
      <h3 className="chart-title">Phases per turn</h3>
      <UChart options={phaseOpts} data={phaseData} height={190} label="Phases of the last turns, stacked" />
      <h3 className="chart-title">tok/s</h3>
      <UChart options={rateOpts} data={rateData} height={140} label="Tokens per second of the last turns" />
    </section>
  );
}

function Machine({ health }: { health: Health | null }) {
  const t = health?.tiers;
  const hw = health?.hwinfo;
  const c = health?.cache;
  const s = health?.scheduler;
  const total = t ? t.disk + t.ram + t.pinned + t.vram : 0;
  return (
    <aside className="prof-side">
      <section className="card" aria-labelledby="tiers-title">
        <div className="card-head">
          <h2 id="tiers-title">
            <HardDrive size={15} /> Memory tiers
          </h2>
        </div>
        {t && total > 0 ? (
          <>
            <div className="tierbar">
              {(["pinned", "ram", "vram", "disk"] as const).map((k) =>
                t[k] > 0 ? <span key={k} className={`tierbar-seg tier-${k}`} style={{ width: `${(t[k] / total) * 100}%` }} title={`${k}: ${fmtInt(t[k])}`} /> : null,
              )}
            </div>
            <dl className="facts">
              <dt><span className="swatch tier-3" /> Pinned</dt>
              <dd>{fmtInt(t.pinned)} · {fmtGB(t.pinned_gb)}</dd>
              <dt><span className="swatch tier-1" /> RAM</dt>
              <dd>{fmtInt(t.ram)} · {fmtGB(t.ram_gb)}</dd>
              {t.vram > 0 ? (
                <>
                  <dt><span className="swatch tier-2" /> VRAM</dt>
                  <dd>{fmtInt(t.vram)} · {fmtGB(t.vram_gb)}</dd>
                </>
              ) : null}
              <dt><span className="swatch tier-0" /> Disk</dt>
              <dd>{fmtInt(t.disk)}</dd>
              {t.dense_gb !== undefined ? (
                <>
                  <dt>Dense part</dt>
                  <dd>{fmtGB(t.dense_gb)}</dd>
                </>
              ) : null}
            </dl>
          </>
        ) : (
          <p className="small muted">{health?.moe === null ? "Dense model: everything stays in RAM." : "The server reports no tiers."}</p>
        )}
        {c ? (
          <dl className="facts">
            <dt>Cache hits</dt>
            <dd>{fmtPct(c.hit_rate)}</dd>
            <dt title="experts read ahead on a prediction that were then chosen">Prefetch used</dt>
            <dd>{fmtPct(c.prefetch_hit_rate)}</dd>
            <dt>Cache budget</dt>
            <dd>{fmtGB(c.budget_gb)}</dd>
            <dt>Read from disk</dt>
            <dd>{fmtBytes(c.bytes_read)}</dd>
          </dl>
        ) : null}
      </section>
      <section className="card" aria-labelledby="hw-title">
        <div className="card-head">
          <h2 id="hw-title">
            <Cpu size={15} /> Machine
          </h2>
        </div>
        {hw ? (
          <dl className="facts">
            <dt>CPU</dt>
            <dd className="ellipsis" title={hw.cpu}>{hw.cpu || "—"}</dd>
            <dt>Cores</dt>
            <dd>{hw.cores}</dd>
            <dt>RAM</dt>
            <dd>{fmtGB(hw.ram_avail_gb)} free of {fmtGB(hw.ram_total_gb)}</dd>
            {hw.gpus > 0 ? (
              <>
                <dt>GPU</dt>
                <dd className="ellipsis" title={hw.gpu}>{hw.gpus}× {hw.gpu} · {fmtGB(hw.vram_total_gb)}</dd>
              </>
            ) : null}
          </dl>
        ) : (
          <p className="small muted">The server has not described the machine{health && !health.model ? " (it may need the API key)" : ""}.</p>
        )}
        {s ? (
          <dl className="facts">
            <dt>Slots busy</dt>
            <dd>{s.active} of {s.capacity}</dd>
            <dt>Queued</dt>
            <dd>{s.queued} (max {s.max_queue})</dd>
            <dt>Completed</dt>
            <dd>{fmtInt(s.completed)}{s.failed ? ` · ${fmtInt(s.failed)} failed` : ""}</dd>
          </dl>
        ) : null}
      </section>
    </aside>
  );
}
