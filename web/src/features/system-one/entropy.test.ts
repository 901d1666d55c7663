import { describe, expect, it } from "vitest";
import { confidence, normalizedEntropy, readEntropy } from "./entropy";

describe("entropy", () => {
  it("is 0 for a certain answer and 1 for a uniform one", () => {
    expect(normalizedEntropy([1, 0, 0])).toBe(0);
    expect(normalizedEntropy([0.25, 0.25, 0.25, 0.25])).toBeCloseTo(1, 12);
    expect(normalizedEntropy([0.5, 0.5])).toBeCloseTo(1, 12);
  });

  it("matches −Σ p ln p / ln n on docs/system-one.md's example (department)", () => {
    const p = [0.059806, 0.939983, 0.000211];
    const h = -p.reduce((s, x) => s + x * Math.log(x), 0) / Math.log(3);
    expect(normalizedEntropy(p)).toBeCloseTo(h, 6);
    expect(readEntropy(normalizedEntropy(p))).toBe("sure");
  });

  it("reads < 0.4 sure, < 0.8 unsure, else undecided", () => {
    expect(readEntropy(0)).toBe("sure");
    expect(readEntropy(0.399)).toBe("sure");
    expect(readEntropy(0.4)).toBe("unsure");
    expect(readEntropy(0.799)).toBe("unsure");
    expect(readEntropy(0.8)).toBe("undecided");
  });

  it("renormalises rounded probabilities and copes with n < 2, zeros and NaN", () => {
    expect(normalizedEntropy([1])).toBe(0);
    expect(normalizedEntropy([])).toBe(0);
    expect(normalizedEntropy([0.5, 0.5, 0])).toBeCloseTo(Math.log(2) / Math.log(3), 12);
    expect(normalizedEntropy([NaN, 1])).toBe(0);
    expect(normalizedEntropy([0, 0])).toBe(1);
  });

  it("confidence follows the server's formula", () => {
    expect(confidence([0.059806, 0.939983, 0.000211])).toBeCloseTo((3 * 0.939983 - 1) / 2, 6); // 0.909974
    expect(confidence([0.5, 0.5])).toBe(0);
    expect(confidence([1])).toBe(1);
  });
});
