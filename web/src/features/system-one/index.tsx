import { useRef, useState } from "react";
import { FileText, Play, Plus, Square, Trash2, Upload } from "lucide-react";
import { postSystemOne } from "../../api/client";
import { ApiError, describeError, isAbort } from "../../api/errors";
import type { SystemOneAnswer } from "../../api/types";
import { useConnection } from "../../stores/connection";
import { fmtPct } from "../../lib/format";
import { Inline } from "../../components/Inline";
import {
  decodeTextFile,
  parseAnswer,
  EXAMPLE_DOCUMENT,
  EXAMPLE_QUESTIONS,
  questionProblem,
  readAnswer,
  toQuestion,
  type DraftQuestion,
  type QuestionKind,
} from "./systemone";

type Result = { state: "pending" } | { state: "done"; answer: SystemOneAnswer; ms: number } | { state: "error"; message: string };

const KINDS: { kind: QuestionKind; label: string }[] = [
  { kind: "choice", label: "Choice" },
  { kind: "yesno", label: "Yes / no" },
  { kind: "score", label: "Score" },
];

let nextKey = 1;
const keyed = (q: DraftQuestion) => ({ ...q, key: nextKey++ });

export function SystemOnePage() {
  const model = useConnection((s) => s.model);
  const capabilities = useConnection((s) => s.health?.capabilities);
  const unsupported = capabilities !== undefined && !capabilities.includes("systemone");
  const [doc, setDoc] = useState(EXAMPLE_DOCUMENT);
  const [docNote, setDocNote] = useState<string | null>(null);
  const [questions, setQuestions] = useState(() => EXAMPLE_QUESTIONS.map(keyed));
  const [results, setResults] = useState<Record<number, Result>>({});
  const [busy, setBusy] = useState(false);
  const ctl = useRef<AbortController | null>(null);
  const fileRef = useRef<HTMLInputElement>(null);

  const patch = (key: number, p: Partial<DraftQuestion>) => setQuestions((qs) => qs.map((q) => (q.key === key ? { ...q, ...p } : q)));
  const problems = questions.map(questionProblem);
  const ids = questions.map((q) => q.id.trim());
  const dupId = ids.find((id, i) => id && ids.indexOf(id) !== i);

  const ask = async () => {
    ctl.current?.abort();
    const c = new AbortController();
    ctl.current = c;
    setBusy(true);
    setResults(Object.fromEntries(questions.map((q) => [q.key, { state: "pending" } as Result])));
    // One question per request (docs/dashboard-feeds.md#the-dashboard-client), so each answer shows as it lands.
    for (const q of questions) {
      if (c.signal.aborted) break;
      const t0 = performance.now();
      try {
        const reply = await postSystemOne({ model: model ?? "", state: doc, questions: { [q.id.trim()]: toQuestion(q) } }, c.signal);
        const answer = parseAnswer(reply?.answers?.[q.id.trim()]);
        setResults((r) => ({
          ...r,
          [q.key]: answer ? { state: "done", answer, ms: performance.now() - t0 } : { state: "error", message: "The reply has no readable answer for this question." },
        }));
      } catch (e) {
        if (isAbort(e)) break;
        const message = describeError(e);
        if (e instanceof ApiError && (e.status === 404 || e.status === 401)) {
          // The endpoint is missing (or locked): every question would get the same answer.
          setResults((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.state === "pending" ? { state: "error", message } : v])));
          break;
        }
        setResults((r) => ({ ...r, [q.key]: { state: "error", message } }));
      }
    }
    setBusy(false);
  };

  const onFile = async (f: File | undefined) => {
    if (!f) return;
    const r = decodeTextFile(new Uint8Array(await f.arrayBuffer()));
    if ("error" in r) setDocNote(`${f.name}: ${r.error}`);
    else {
      setDoc(r.text);
      setDocNote(`Loaded ${f.name}`);
    }
  };

  return (
    <div className="page s1" data-testid="page-systemone">
      <header className="page-head">
        <div>
          <h1>System One</h1>
          <p className="muted">Fast decisions: the model reads a document and picks among the answers you allow, with its probabilities.</p>
        </div>
      </header>
      {unsupported ? (
        <p className="notice" role="status" data-testid="s1-unsupported">
          This server does not offer System One (it lists {capabilities.length ? capabilities.join(", ") : "no capabilities"}); questions asked
          here will be refused.
        </p>
      ) : null}
      <div className="s1-grid">
        <section className="card s1-doc" aria-labelledby="s1-doc-title">
          <div className="card-head">
            <h2 id="s1-doc-title">
              <FileText size={16} /> Document
            </h2>
            <button type="button" className="btn ghost small" onClick={() => fileRef.current?.click()}>
              <Upload size={14} /> Text file
            </button>
            <input ref={fileRef} type="file" accept=".txt,.md,.csv,.json,.log,text/*" hidden data-testid="s1-file" onChange={(e) => { void onFile(e.target.files?.[0]); e.target.value = ""; }} />
          </div>
          <textarea className="input s1-text" value={doc} onChange={(e) => setDoc(e.target.value)} aria-label="Document" data-testid="s1-doc" />
          <div className="small muted s1-doc-foot">
            <span>{doc.length.toLocaleString()} characters</span>
            {docNote ? <span role="status" className={docNote.includes("NUL") ? "danger" : ""}>{docNote}</span> : null}
          </div>
        </section>

        <section className="s1-questions" aria-label="Questions">
          {questions.map((q, i) => {
            const res = results[q.key];
            return (
              <div key={q.key} className="card s1-q" data-testid="s1-question">
                <div className="s1-q-head">
                  <input className="input s1-id" value={q.id} onChange={(e) => patch(q.key, { id: e.target.value })} aria-label="Question name" />
                  <div className="segmented" role="radiogroup" aria-label="Answer type">
                    {KINDS.map((k) => (
                      <button
                        key={k.kind}
                        type="button"
                        role="radio"
                        aria-checked={q.kind === k.kind}
                        className={q.kind === k.kind ? "on" : ""}
                        onClick={() => patch(q.key, { kind: k.kind, options: k.kind === "yesno" ? [] : q.options.length >= 2 ? q.options : k.kind === "score" ? ["low", "medium", "high"] : ["a", "b"] })}
                      >
                        {k.label}
                      </button>
                    ))}
                  </div>
                  <button type="button" className="icon-btn" aria-label={`Remove question ${q.id}`} onClick={() => setQuestions((qs) => qs.filter((x) => x.key !== q.key))}>
                    <Trash2 size={14} />
                  </button>
                </div>
                <input className="input" placeholder="Instructions (optional)" value={q.instructions} onChange={(e) => patch(q.key, { instructions: e.target.value })} aria-label="Instructions" />
                {q.kind !== "yesno" ? (
                  <div className="chips">
                    {q.options.map((o, j) => (
                      <span key={j} className="chip">
                        {q.kind === "score" ? <span className="chip-n">{j}</span> : null}
                        <input
                          value={o}
                          size={Math.max(4, o.length)}
                          aria-label={q.kind === "score" ? `Level ${j}` : `Option ${j + 1}`}
                          onChange={(e) => patch(q.key, { options: q.options.map((x, k) => (k === j ? e.target.value : x)) })}
                        />
                        <button type="button" aria-label="Remove" onClick={() => patch(q.key, { options: q.options.filter((_, k) => k !== j) })}>
                          ×
                        </button>
                      </span>
                    ))}
                    <button type="button" className="chip add" onClick={() => patch(q.key, { options: [...q.options, ""] })} aria-label="Add an option">
                      <Plus size={12} />
                    </button>
                  </div>
                ) : null}
                {problems[i] ? <p className="small warn">{problems[i]}</p> : null}
                <AnswerView res={res} />
              </div>
            );
          })}
          <button type="button" className="btn ghost add-q" onClick={() => setQuestions((qs) => [...qs, keyed({ id: `q${qs.length + 1}`, kind: "choice", instructions: "", options: ["", ""] })])} disabled={questions.length >= 64}>
            <Plus size={14} /> Add a question
          </button>
        </section>
      </div>
      <div className="s1-actions">
        {dupId ? <span className="small warn">Two questions are named “{dupId}”.</span> : null}
        {busy ? (
          <button type="button" className="btn stop" onClick={() => ctl.current?.abort()}>
            <Square size={14} fill="currentColor" /> Stop
          </button>
        ) : (
          <button type="button" className="btn primary" data-testid="s1-ask" disabled={questions.length === 0 || problems.some(Boolean) || !!dupId} onClick={() => void ask()}>
            <Play size={14} /> Decide
          </button>
        )}
      </div>
    </div>
  );
}

function AnswerView({ res }: { res: Result | undefined }) {
  if (!res) return null;
  if (res.state === "pending") return <div className="s1-answer pending" aria-busy="true"><span className="shimmer" /></div>;
  if (res.state === "error") return <p className="s1-answer msg-error" role="alert"><Inline text={res.message} /></p>;
  const r = readAnswer(res.answer);
  return (
    <div className="s1-answer" data-testid="s1-answer">
      <div className="s1-verdict">
        <strong>{r.headline}</strong>
        <span className={`pill ${r.certainty}`} title={`normalised entropy ${r.entropy.toFixed(2)}`}>
          {r.certainty}
        </span>
        <span className="small muted">
          confidence {fmtPct(r.confidence)} · entropy {r.entropy.toFixed(2)} · {Math.round(res.ms)} ms
        </span>
      </div>
      <ul className="bars" role="list">
        {r.bars.map((b) => (
          <li key={b.label} className={b.top ? "top" : ""}>
            <span className="bar-label">{b.label}</span>
            <span className="bar-track">
              <span className="bar-fill" style={{ width: `${Math.max(0.5, b.p * 100)}%` }} />
            </span>
            <span className="bar-value">{fmtPct(b.p)}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
