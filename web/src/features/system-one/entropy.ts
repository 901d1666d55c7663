// System One's reading of an answer (docs/system-one.md#entropy): the server returns
// probabilities and a confidence, never an entropy; the client computes the
// normalised entropy −Σ p ln p / ln n and reads it as sure / unsure.

export type Certainty = "sure" | "unsure" | "undecided";

/** Normalised entropy in [0, 1]; 0 for n < 2. Zero and negative probabilities contribute nothing. */
export function normalizedEntropy(probs: readonly number[]): number {
  const n = probs.length;
  if (n < 2) return 0;
  let total = 0;
  for (const p of probs) if (p > 0 && Number.isFinite(p)) total += p;
  if (total <= 0) return 1;
  let h = 0;
  for (const p of probs) {
    if (!(p > 0) || !Number.isFinite(p)) continue;
    const q = p / total;
    h -= q * Math.log(q);
  }
  return Math.min(1, Math.max(0, h / Math.log(n)));
}

/** < 0.4 sure, < 0.8 unsure, otherwise undecided (close to uniform). */
export function readEntropy(h: number): Certainty {
  if (h < 0.4) return "sure";
  if (h < 0.8) return "unsure";
  return "undecided";
}

/** The server's confidence formula, for answers that carry none (yes/no): max(0, (n·peak − 1)/(n − 1)). */
export function confidence(probs: readonly number[]): number {
  const n = probs.length;
  if (n < 2) return 1;
  const peak = Math.max(...probs);
  return Math.max(0, (n * peak - 1) / (n - 1));
}
