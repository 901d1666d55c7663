import { describe, expect, it } from "vitest";
import { decodeTextFile, parseAnswer, questionProblem, readAnswer, toQuestion } from "./systemone";

describe("System One client", () => {
  it("builds the request shape of each type", () => {
    expect(toQuestion({ id: "u", kind: "yesno", instructions: " Urgent? ", options: [] })).toEqual({ type: "noul", instructions: "Urgent?" });
    expect(toQuestion({ id: "d", kind: "choice", instructions: "", options: ["billing", " technical ", ""] })).toEqual({
      type: "choice",
      criteria: { billing: null, technical: null },
    });
    expect(toQuestion({ id: "s", kind: "score", instructions: "How bad?", options: ["low", "", "high"] })).toEqual({
      type: "score",
      instructions: "How bad?",
      criteria: ["low", null, "high"],
    });
  });

  it("says what is missing", () => {
    expect(questionProblem({ id: "", kind: "yesno", instructions: "", options: [] })).toMatch(/name/);
    expect(questionProblem({ id: "a", kind: "choice", instructions: "", options: ["x"] })).toMatch(/two options/);
    expect(questionProblem({ id: "a", kind: "choice", instructions: "", options: ["x", "x"] })).toMatch(/differ/);
    expect(questionProblem({ id: "a", kind: "score", instructions: "", options: ["x"] })).toMatch(/two levels/);
    expect(questionProblem({ id: "a", kind: "choice", instructions: "", options: ["x", "y"] })).toBeNull();
  });

  it("reads the example answers of docs/system-one.md#example", () => {
    const dept = readAnswer({ type: "choice", choice: "technical", probabilities: { billing: 0.059806, technical: 0.939983, sales: 0.000211 }, confidence: 0.909974 });
    expect(dept.headline).toBe("technical");
    expect(dept.bars.find((b) => b.top)?.label).toBe("technical");
    expect(dept.certainty).toBe("sure");
    const sev = readAnswer({
      type: "score",
      score: 2.831772,
      legend: { "0": "trivial", "1": "minor", "2": "moderate", "3": "major", "4": "critical" },
      probabilities: { "0": 0.044403, "1": 0.02624, "2": 0.034899, "3": 0.842097, "4": 0.052361 },
      confidence: 0.802621,
    });
    expect(sev.headline).toBe("2.83");
    expect(sev.bars.map((b) => b.label)[3]).toBe("3 · major");
    expect(sev.bars[3].top).toBe(true);
    const urg = readAnswer({ type: "noul", noul: 0.847606 });
    expect(urg.headline).toBe("yes");
    expect(urg.bars[1].p).toBeCloseTo(0.152394);
    expect(urg.confidence).toBeCloseTo(0.695212, 6);
    expect(urg.certainty).toBe("unsure");
  });

  it("checks answers at the boundary", () => {
    expect(parseAnswer({ type: "noul", noul: 0.5 })).toEqual({ type: "noul", noul: 0.5 });
    expect(parseAnswer({ type: "choice", choice: "a", probabilities: { a: 1 }, confidence: 1 })).not.toBeNull();
    expect(parseAnswer({ type: "choice", choice: "a", probabilities: { a: "x" }, confidence: 1 })).toBeNull();
    expect(parseAnswer({ type: "score", score: 1, probabilities: { "0": 0.5, "1": 0.5 }, confidence: 0 })).toMatchObject({ legend: {} });
    expect(parseAnswer({ type: "mystery" })).toBeNull();
    expect(parseAnswer(null)).toBeNull();
  });

  it("refuses files with NUL bytes and decodes UTF-8", () => {
    expect(decodeTextFile(new Uint8Array([104, 0, 105]))).toHaveProperty("error");
    expect(decodeTextFile(new TextEncoder().encode("héllo"))).toEqual({ text: "héllo" });
  });
});
