// System One, client side: questions as the user edits them → the request
// shape of docs/system-one.md#request, and an answer → bars, confidence and an entropy
// reading. Pure.

import type { SystemOneAnswer, SystemOneQuestion } from "../../api/types";
import { confidence as confidenceOf, normalizedEntropy, readEntropy, type Certainty } from "./entropy";

export type QuestionKind = "choice" | "yesno" | "score";

export interface DraftQuestion {
  id: string;
  kind: QuestionKind;
  instructions: string;
  /** choice: labels; score: level descriptions (level i = score i); yesno: unused. */
  options: string[];
}

export function toQuestion(q: DraftQuestion): SystemOneQuestion {
  const instructions = q.instructions.trim() || undefined;
  if (q.kind === "yesno") return instructions ? { type: "noul", instructions } : { type: "noul" };
  if (q.kind === "score") {
    const criteria = q.options.map((o) => o.trim() || null);
    return instructions ? { type: "score", instructions, criteria } : { type: "score", criteria };
  }
  const criteria: Record<string, null> = {};
  for (const o of q.options) if (o.trim()) criteria[o.trim()] = null;
  return instructions ? { type: "choice", instructions, criteria } : { type: "choice", criteria };
}

/** Why a question cannot be asked yet, or null. */
export function questionProblem(q: DraftQuestion): string | null {
  if (!q.id.trim()) return "Give the question a name.";
  if (q.kind === "yesno") return null;
  const opts = q.options.map((o) => o.trim()).filter(Boolean);
  if (q.kind === "choice") {
    if (opts.length < 2) return "A choice needs at least two options.";
    if (new Set(opts).size !== opts.length) return "Options must differ.";
  }
  if (q.kind === "score" && q.options.length < 2) return "A score needs at least two levels.";
  return null;
}

export interface Bar {
  label: string;
  p: number;
  /** The answer's pick (choice label, or the level nearest the score). */
  top: boolean;
}

export interface Reading {
  headline: string;
  bars: Bar[];
  confidence: number;
  entropy: number;
  certainty: Certainty;
}

export function readAnswer(a: SystemOneAnswer): Reading {
  let bars: Bar[];
  let headline: string;
  let conf: number;
  if (a.type === "noul") {
    const yes = a.noul;
    bars = [
      { label: "yes", p: yes, top: yes >= 0.5 },
      { label: "no", p: 1 - yes, top: yes < 0.5 },
    ];
    headline = yes >= 0.5 ? "yes" : "no";
    conf = confidenceOf([yes, 1 - yes]);
  } else if (a.type === "choice") {
    bars = Object.entries(a.probabilities).map(([label, p]) => ({ label, p, top: label === a.choice }));
    headline = a.choice;
    conf = a.confidence;
  } else {
    const levels = Object.keys(a.probabilities).sort((x, y) => Number(x) - Number(y));
    const peak = levels.reduce((best, l) => (a.probabilities[l] > a.probabilities[best] ? l : best), levels[0] ?? "0");
    bars = levels.map((l) => ({ label: a.legend[l] ? `${l} · ${a.legend[l]}` : l, p: a.probabilities[l], top: l === peak }));
    headline = a.score.toFixed(2);
    conf = a.confidence;
  }
  const entropy = normalizedEntropy(bars.map((b) => b.p));
  return { headline, bars, confidence: conf, entropy, certainty: readEntropy(entropy) };
}

/** Reads a text file's bytes: refuses NUL bytes (binary files), decodes UTF-8. */
export function decodeTextFile(bytes: Uint8Array): { text: string } | { error: string } {
  if (bytes.includes(0)) return { error: "This file contains NUL bytes: it is not a text file." };
  return { text: new TextDecoder("utf-8").decode(bytes) };
}

export const EXAMPLE_DOCUMENT = `Subject: Charged twice and the app won't open

Hi — since this morning the app crashes on start-up, and I noticed my card was charged twice for this month's plan. I need the app for a client meeting tomorrow. Can you fix this quickly?

— Dana`;

export const EXAMPLE_QUESTIONS: DraftQuestion[] = [
  { id: "urgency", kind: "yesno", instructions: "Is this ticket urgent?", options: [] },
  { id: "department", kind: "choice", instructions: "Which team should handle it?", options: ["billing", "technical", "sales"] },
  { id: "severity", kind: "score", instructions: "How severe is the problem?", options: ["trivial", "minor", "moderate", "major", "critical"] },
];

/** An answer as the reply should carry it (docs/system-one.md#response), or null: the boundary check before drawing. */
export function parseAnswer(v: unknown): SystemOneAnswer | null {
  if (!v || typeof v !== "object") return null;
  const a = v as Record<string, unknown>;
  const probs = (p: unknown) => !!p && typeof p === "object" && Object.values(p).every((x) => typeof x === "number" && Number.isFinite(x));
  if (a.type === "noul" && typeof a.noul === "number") return a as unknown as SystemOneAnswer;
  if (a.type === "choice" && typeof a.choice === "string" && probs(a.probabilities) && typeof a.confidence === "number") return a as unknown as SystemOneAnswer;
  if (a.type === "score" && typeof a.score === "number" && probs(a.probabilities) && typeof a.confidence === "number")
    return { ...(a as unknown as SystemOneAnswer), legend: a.legend && typeof a.legend === "object" ? (a.legend as Record<string, string>) : {} } as SystemOneAnswer;
  return null;
}
