import { describe, expect, it } from "vitest";
import {
  parseCoroute,
  parseExperts,
  parseHealth,
  parseProfile,
  parseRoutingEvent,
  turnAcceptance,
  turnPhases,
  turnTokPerS,
  turnTokensPerStep,
} from "./feeds";
import { bytesToBase64 } from "../lib/bytes";
import type { ExpertsFeed, ProfileTurn } from "./types";

function u32(values: number[]): Uint8Array {
  const b = new Uint8Array(values.length * 4);
  const dv = new DataView(b.buffer);
  values.forEach((v, i) => dv.setUint32(i * 4, v, true));
  return b;
}

describe("feeds", () => {
  it("decodes the experts feed: map bytes, hits bitmap, counts", () => {
    const feed: ExpertsFeed = {
      v: 1,
      rows: 2,
      cols: 4,
      layers: [1, 2],
      seq: 9,
      map: bytesToBase64(new Uint8Array([0, 1, 2, 3, (1 << 6) | 10, (2 << 6) | 20, (3 << 6) | 30, 63])),
      hits: bytesToBase64(new Uint8Array([0b10000001])),
      counts: bytesToBase64(u32([0, 1, 2, 3, 4, 5, 6, 4_000_000_000])),
      tokens: 77,
    };
    const f = parseExperts(feed)!;
    expect(f.rows).toBe(2);
    expect(f.layers).toEqual([1, 2]);
    expect(Array.from(f.map)).toEqual([0, 1, 2, 3, 74, 148, 222, 63]);
    expect(f.hits[0]).toBe(0b10000001);
    expect(f.counts?.[7]).toBe(4_000_000_000);
    expect(f.tokens).toBe(77);
  });

  it("refuses an experts feed whose sizes disagree, and bad base64", () => {
    const ok = { v: 1, rows: 1, cols: 3, layers: [0], seq: 1, map: bytesToBase64(new Uint8Array(3)), hits: bytesToBase64(new Uint8Array(1)) };
    expect(parseExperts(ok)).not.toBeNull();
    expect(parseExperts({ ...ok, map: bytesToBase64(new Uint8Array(2)) })).toBeNull();
    expect(parseExperts({ ...ok, hits: "" })).toBeNull();
    expect(parseExperts({ ...ok, map: "***" })).toBeNull();
    expect(parseExperts("<html>")).toBeNull();
    expect(parseExperts({ ...ok, layers: [0, 1] })?.layers).toEqual([0]); // bad layers: row numbers
  });

  it("a dense model's experts feed is rows = cols = 0", () => {
    const f = parseExperts({ v: 1, rows: 0, cols: 0, layers: [], seq: 0, map: "", hits: "" });
    expect(f?.map.length).toBe(0);
  });

  it("decodes /events routing steps that fit the map, and only those", () => {
    const hits = bytesToBase64(new Uint8Array([0b101]));
    expect(parseRoutingEvent(JSON.stringify({ seq: 4, rows: 1, cols: 8, hits }), 1, 8)).toEqual({ seq: 4, hits: new Uint8Array([0b101]) });
    expect(parseRoutingEvent(JSON.stringify({ seq: 4, rows: 2, cols: 8, hits }), 1, 8)).toBeNull();
    expect(parseRoutingEvent(JSON.stringify({ seq: 4, rows: 2, cols: 8, hits }), 2, 8)).toBeNull(); // too short
    expect(parseRoutingEvent("not json", 1, 8)).toBeNull();
  });

  it("decodes the coroute feed into a graph", () => {
    const nbr = u32([1, 0xffffffff, 0, 0xffffffff]);
    const c = parseCoroute({ v: 1, rows: 1, cols: 2, k: 2, tokens: 5, nbr: bytesToBase64(nbr), w: bytesToBase64(new Uint8Array([255, 0, 255, 0])) })!;
    expect(c.graph.n).toBe(2);
    expect(Array.from(c.graph.nbr)).toEqual([1, 0xffffffff, 0, 0xffffffff]);
    expect(parseCoroute({ v: 1, rows: 1, cols: 2, k: 3, tokens: 5, nbr: bytesToBase64(nbr), w: "" })).toBeNull();
  });

  it("reads health leniently: reduced, full, and junk", () => {
    expect(parseHealth({ status: "ok" })).toEqual({ status: "ok" });
    expect(parseHealth({ status: "ok", kv_slots: 4, moe: null, extra: 1 })).toMatchObject({ kv_slots: 4, moe: null });
    expect(parseHealth({ status: "ok", kv_slots: -1, tiers: 5 })).toEqual({ status: "ok" });
    expect(parseHealth(null)).toBeNull();
    expect(parseHealth([])).toBeNull();
  });

  const turn: ProfileTurn = {
    id: 3,
    t: 1700000000,
    slot: 0,
    wall_s: 10,
    prompt_tokens: 50,
    completion_tokens: 200,
    prefill_s: 1,
    expert_disk_s: 4,
    expert_wait_s: 2,
    expert_matmul_s: 3,
    attention_s: 1.5,
    lm_head_s: 0.5,
    forwards: 201,
    bytes_read: 1e9,
    cache_hit_rate: 0.9,
    prefetch_hit_rate: 0.7,
  };

  it("profile: phases with other = max(0, wall − the rest); tok/s = completion ÷ wall", () => {
    expect(turnPhases(turn)).toEqual({ wait: 2, matmul: 3, attention: 1.5, linear: 0, head: 0.5, other: 3 });
    expect(turnPhases({ ...turn, wall_s: 5 }).other).toBe(0);
    // a hybrid model's linear-attention layers: a phase of their own, out of "other"
    expect(turnPhases({ ...turn, linear_attention_s: 2 })).toMatchObject({ attention: 1.5, linear: 2, other: 1 });
    expect(parseProfile({ seq: 1, turns: [{ ...turn, linear_attention_s: 2 }] })?.turns[0].linear_attention_s).toBe(2);
    expect(turnTokPerS(turn)).toBe(20);
    expect(turnTokPerS({ ...turn, wall_s: 0 })).toBe(0);
  });

  it("profile: speculative decoding's tokens per step, only for a turn that drafted", () => {
    const drafted = parseProfile({ seq: 1, turns: [{ ...turn, draft_tokens: 120, draft_accepted: 100 }] })!.turns[0];
    expect(drafted).toMatchObject({ draft_tokens: 120, draft_accepted: 100 });
    expect(turnTokensPerStep(drafted)).toBe(2); // 200 tokens in 100 steps
    expect(turnTokensPerStep(turn)).toBeNull();
    expect(turnTokensPerStep({ ...turn, draft_tokens: 0, draft_accepted: 0 })).toBeNull();
    expect(turnAcceptance(drafted)).toBeCloseTo(100 / 120);
    expect(turnAcceptance(turn)).toBeNull();
  });

  it("profile: the drafter is kept when it is one the client knows and the turn drafted, else dropped", () => {
    const parse = (extra: object) => parseProfile({ seq: 1, turns: [{ ...turn, ...extra }] })!.turns[0];
    for (const drafter of ["mtp", "lookup", "model"] as const)
      expect(parse({ draft_tokens: 92, draft_accepted: 67, drafter }).drafter).toBe(drafter);
    for (const drafter of ["eagle", "", 3, null, { name: "mtp" }])
      expect(parse({ draft_tokens: 92, draft_accepted: 67, drafter })).not.toHaveProperty("drafter");
    expect(parse({ drafter: "mtp" })).not.toHaveProperty("drafter"); // no draft counts: the turn did not draft
  });

  it("profile: keeps valid turns, fills optional fields, drops broken ones", () => {
    const upstream = { wall_s: 1, prompt_tokens: 1, completion_tokens: 1, expert_disk_s: 0, expert_wait_s: 0, expert_matmul_s: 0, attention_s: 0, lm_head_s: 0, forwards: 2 };
    const p = parseProfile({ seq: 4, turns: [turn, upstream, { wall_s: "x" }, null] })!;
    expect(p.seq).toBe(4);
    expect(p.turns).toHaveLength(2);
    expect(p.turns[0]).toEqual(turn);
    expect(p.turns[1]).toMatchObject({ id: 1, bytes_read: 0, cache_hit_rate: null, prefetch_hit_rate: null });
    expect(parseProfile({})).toBeNull();
  });
});

describe("parseProfile through `coli serve --upstream`", () => {
  it("reads the gateway's per-request timings, no engine turns", () => {
    const feed = parseProfile({
      seq: 2,
      source: "gateway",
      turns: [
        { id: 1, t: 5, upstream: "http://a:8000", queue_wait_s: 0, first_output_s: 0.12, inter_token_s: 0.04, wall_s: 2,
          prompt_tokens: 9, completion_tokens: 48, finish: "length" },
        { id: 2, upstream: "http://b:8000", queue_wait_s: 0.5, first_output_s: null, inter_token_s: null, wall_s: 0.1,
          finish: "error" },
        { id: "bad" },
      ],
    });
    expect(feed?.turns).toEqual([]);
    expect(feed?.gateway?.map((t) => [t.upstream, t.first_output_s, t.completion_tokens])).toEqual([
      ["http://a:8000", 0.12, 48],
      ["http://b:8000", null, 0],
    ]);
  });
});
