"""What `coli serve --upstream` costs under load: N concurrent clients, each sending requests one after another,
through the gateway in front of three upstream engines, and straight at the same three (client i at upstream
i % 3), on the same prompts. Each upstream is llama.cpp's llama-server (COLI_LLAMA_SERVER, built by
scripts/test.sh) on the tests' default model (Gemma 3 270M), on a host of its own: a network namespace with
its own address (tests/sidecar/netns_support.py; needs root). The upstreams take --slots requests at once, the
gateway --slots per upstream: the same concurrency both ways. The upstreams' prompt cache is off
(--no-cache-prompt): with it, an engine's work for a request depends on which of its slots last held what
(Gemma 3's sliding window makes llama-server reuse a prefix only from its checkpoints: 75 ms or 210 ms for
the same request here), which is routing (tests/sidecar/test_upstream_cluster.py measures that), not what the
gateway costs.

For each count of clients (--clients, default 1 and 6: one alone measures the latency the gateway adds
without queueing noise, six fill every slot), rounds alternate the two ways, each first in turn (machine
noise hits them alike);
per way, the median over rounds of the throughput (requests/s) and of the per-request latency's p50 and p90;
the gateway's throughput as a share of the straight one and its added p50 latency; the gateway process's CPU
time per request; with one client, the gateway's own time per request (what the client waited beyond the
upstream call as the gateway timed it, /profile: free of the engines' noise). Tiny replies (--max-tokens,
default 2) so that the gateway's share of each request is as large as it gets.

    sudo .venv/bin/python bench/bench_gateway.py [--clients 1,6] [--requests 20] [--rounds 3] [--max-tokens 2]
                                                 [--slots 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "sidecar")]

from tests.sidecar.llama_server_support import LlamaCppServer  # noqa: E402
from tests.sidecar.netns_support import Hosts, netns_unavailable  # noqa: E402
from tests.sidecar.serve_support import ServerProcess  # noqa: E402

PORT = 8080


def client(url: str, model: str, i: int, n: int, max_tokens: int, latencies: list[float], errors: list[str]) -> None:
    """n requests one after another on one kept-alive connection; each one's latency (send to last byte)."""
    host, port = url[len("http://"):].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        for k in range(n):
            body = json.dumps({"model": model, "max_tokens": max_tokens, "temperature": 0,
                               "messages": [{"role": "user", "content": f"Client {i}, request {k}: name a colour."}]})
            t0 = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
            latencies.append(time.perf_counter() - t0)
            if resp.status != 200:
                errors.append(f"{resp.status}: {raw[:200]!r}")
    finally:
        conn.close()


def load(urls: list[str], model: str, clients: int, requests: int, max_tokens: int) -> dict:
    """`clients` at once, client i at urls[i % len(urls)]: requests/s and latency percentiles."""
    latencies: list[float] = []
    errors: list[str] = []
    threads = [threading.Thread(target=client, args=(urls[i % len(urls)], model, i, requests, max_tokens,
                                                     latencies, errors)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. {errors[0]}")
    q = statistics.quantiles(latencies, n=10)
    return {"requests": len(latencies), "wall_s": wall, "rps": len(latencies) / wall,
            "p50_ms": statistics.median(latencies) * 1e3, "p90_ms": q[8] * 1e3, "latencies": latencies}


def gateway_own_ms(gw, since: int, latencies: list[float]) -> float:
    """One client's requests in order, each paired with the gateway's own timing of its upstream call (/profile's
    wall_s): the median of what the client waited beyond that call, the gateway's own added time (its parsing,
    queue, reply, and the hop to it) free of the engines' noise."""
    rows = [r for r in json.loads(gw.get("/profile")[2])["turns"] if r["id"] > since]
    assert len(rows) == len(latencies), (len(rows), len(latencies))
    return statistics.median((lat - r["wall_s"]) * 1e3 for lat, r in zip(latencies, rows))


def profile_seq(gw) -> int:
    return json.loads(gw.get("/profile")[2])["seq"]


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,6", help="counts of concurrent clients, comma-separated")
    ap.add_argument("--requests", type=int, default=20, help="per client, per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=2)
    ap.add_argument("--slots", type=int, default=2, help="requests each upstream runs at once")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    binary = os.environ.get("COLI_LLAMA_SERVER")
    if not binary or not os.access(binary, os.X_OK):
        sys.exit("COLI_LLAMA_SERVER must name a llama-server binary (scripts/test.sh builds one)")
    reason = netns_unavailable()
    if reason:
        sys.exit(reason)
    from colibri.models import embedded_model_path

    model = embedded_model_path(progress=False)
    counts = [int(c) for c in args.clients.split(",")]
    rows: dict[int, dict[str, list[dict]]] = {n: {"straight": [], "gateway": []} for n in counts}
    with Hosts(3) as hosts:
        engines = [LlamaCppServer(binary, model, host=h.address, port=PORT, parallel=args.slots, prefix=h.run,
                                  extra=["--no-cache-prompt"]).start() for h in hosts.all]
        try:
            urls = [e.url for e in engines]
            gw_args = [a for u in urls for a in ("--upstream", u)] + ["--upstream-slots", str(args.slots),
                                                                      "--max-queue", str(max(counts))]
            with ServerProcess(gw_args) as gw:
                name = engines[0].model_id
                load(urls, name, max(counts), 2, args.max_tokens)  # warm both ways
                load([gw.base], name, max(counts), 2, args.max_tokens)
                for r in range(args.rounds):
                    for n in counts:
                        for way in (("straight", "gateway") if r % 2 == 0 else ("gateway", "straight")):
                            c0, seq = cpu_s(gw.proc.pid), profile_seq(gw)
                            row = load(urls if way == "straight" else [gw.base], name, n, args.requests,
                                       args.max_tokens)
                            row["gateway_cpu_ms_per_request"] = (cpu_s(gw.proc.pid) - c0) * 1e3 / row["requests"]
                            if way == "gateway" and n == 1:
                                row["gateway_own_p50_ms"] = gateway_own_ms(gw, seq, row["latencies"])
                            del row["latencies"]
                            rows[n][way].append(row)
                        row = rows[n]["gateway"][-1]
                        print(f"round {r + 1}, {n} clients: straight {rows[n]['straight'][-1]['rps']:.2f} req/s, "
                              f"p50 {rows[n]['straight'][-1]['p50_ms']:.1f} ms; gateway {row['rps']:.2f} req/s, "
                              f"p50 {row['p50_ms']:.1f} ms", file=sys.stderr)
        finally:
            for e in engines:
                e.kill()
    print(f"{args.requests} requests a client x {args.rounds} rounds, max_tokens {args.max_tokens}, "
          f"3 upstreams x {args.slots} slots, llama-server on Gemma 3 270M (prompt cache off); medians over rounds")
    print(f"{'clients':>7} {'way':9} {'req/s':>8} {'p50 ms':>8} {'p90 ms':>8}")
    summary = {}
    for n in counts:
        med = {way: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for way, rs in rows[n].items()}
        for way in ("straight", "gateway"):
            print(f"{n:7d} {way:9} {med[way]['rps']:8.2f} {med[way]['p50_ms']:8.1f} {med[way]['p90_ms']:8.1f}")
        summary[n] = {"median": med, "throughput_share": med["gateway"]["rps"] / med["straight"]["rps"],
                      "added_p50_ms": med["gateway"]["p50_ms"] - med["straight"]["p50_ms"],
                      "gateway_cpu_ms_per_request": med["gateway"]["gateway_cpu_ms_per_request"]}
        own = med["gateway"].get("gateway_own_p50_ms")
        print(f"{'':7} gateway: {summary[n]['throughput_share'] * 100:.1f}% of the straight throughput, p50 "
              f"{summary[n]['added_p50_ms']:+.2f} ms, {summary[n]['gateway_cpu_ms_per_request']:.2f} ms of "
              f"its CPU a request" + (f", {own:.2f} ms of its own time a request (p50, paired)" if own else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rounds": rows, "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
