import { describe, expect, it } from "vitest";
import { fmtBytes, fmtGB, fmtMs, fmtPct, fmtSec } from "./format";

describe("format", () => {
  it("percentages never round a real chance to 0% or 100%", () => {
    expect(fmtPct(0.000211)).toBe("<0.1%");
    expect(fmtPct(0.9999)).toBe(">99.9%");
    expect(fmtPct(0.059806)).toBe("6.0%");
    expect(fmtPct(0.939983)).toBe("94%");
    expect(fmtPct(0)).toBe("0%");
    expect(fmtPct(1)).toBe("100%");
    expect(fmtPct(null)).toBe("—");
  });
  it("times, bytes, GB", () => {
    expect(fmtMs(412)).toBe("412 ms");
    expect(fmtMs(2500)).toBe("2.50 s");
    expect(fmtSec(0.875)).toBe("875 ms");
    expect(fmtSec(12.34)).toBe("12.3 s");
    expect(fmtBytes(1837000000)).toBe("1.8 GB");
    expect(fmtBytes(512)).toBe("512 B");
    expect(fmtGB(5.12)).toBe("5.1 GB");
    expect(fmtGB(undefined)).toBe("—");
    expect(fmtGB(0.001945)).toBe("1.9 MB");
    expect(fmtGB(0.05)).toBe("50 MB");
    expect(fmtGB(0)).toBe("0.0 GB");
  });
});
