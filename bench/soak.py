"""A soak of `coli serve`: mixed traffic for a long time while the server's resident memory
is sampled, to show it stays flat (no leak per request, per cancellation or per error).

Traffic, from --clients threads at once (default 3), each request drawn at random:
chat completions, legacy completions and Anthropic messages, streamed or not, some with
tools, some cancelled (the socket closed at a random point: before the reply, after the
headers, mid-stream), and a few bad requests (not JSON, the wrong content type, an unknown
model, a 5000-digit integer, an unknown field). The server is a fresh `coli serve` on a
small real model (the default model with Qwen3's chat template, so tool calls are rendered
and parsed), or the one at --url.

Every --sample seconds the server's RSS (psutil, the process and its children) is read.
After --warmup minutes, the baseline is the median RSS of the first minute; the end is the
median of the last minute; the target is |end - baseline| <= 5% of the baseline. Printed:
RSS baseline / end / max / drift, requests by kind and status, cancellations, errors (5xx,
broken streams, unanswered requests), the server's own /health counters at the end, and
whether a request right after the soak is answered promptly.

    python bench/soak.py                         # 30 minutes, 3 clients
    python bench/soak.py --minutes 5 --warmup 1  # a short one
    python bench/soak.py --json soak.json        # figures as JSON too
"""
from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import random
import socket
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if os.path.isdir(os.path.join(ROOT, "sidecar", "colibri")):
    sys.path.insert(0, os.path.join(ROOT, "sidecar"))

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
WEATHER_ANTHROPIC = {"name": "get_weather", "description": "The weather in a city",
                     "input_schema": WEATHER["function"]["parameters"]}
WORDS = ("hello world tell me a story about a cat in the rain what is the capital of france count to ten "
         "summarise this text please write a haiku on autumn leaves").split()


def prompt(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 60)))


def make_request(rng: random.Random, model: str) -> tuple[str, str, bytes, dict, bool]:
    """(kind, path, body, headers, stream) of one random request."""
    json_headers = {"Content-Type": "application/json"}
    r = rng.random()
    if r < 0.05:  # bad requests, each a named 4xx
        bad = rng.choice([
            (b"{not json", json_headers),
            (json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]}).encode(),
             {"Content-Type": "text/plain"}),
            (json.dumps({"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}).encode(),
             json_headers),
            (b'{"model": "%s", "max_tokens": %s, "messages": []}' % (model.encode(), b"9" * 5000), json_headers),
            (json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "bogus": 1}).encode(),
             json_headers),
        ])
        return "bad", "/v1/chat/completions", bad[0], bad[1], False
    stream = rng.random() < 0.5
    max_tokens = rng.randint(1, 24)
    text = prompt(rng)
    kind = rng.choice(["chat", "chat", "completions", "messages"])
    tools = kind != "completions" and rng.random() < 0.25
    if kind == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                "stream": stream, "temperature": rng.choice([0, 0.7, 1.0])}
        if stream and rng.random() < 0.5:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = [WEATHER]
        path = "/v1/chat/completions"
    elif kind == "completions":
        body = {"model": model, "prompt": text, "max_tokens": max_tokens, "stream": stream}
        path = "/v1/completions"
    else:
        body = {"model": model, "max_tokens": max_tokens, "stream": stream,
                "messages": [{"role": "user", "content": text}]}
        if tools:
            body["tools"] = [WEATHER_ANTHROPIC]
        path = "/v1/messages"
    return kind + ("+tools" if tools else "") + ("/stream" if stream else ""), path, json.dumps(body).encode(), \
        json_headers, stream


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind: collections.Counter = collections.Counter()
        self.errors: list[str] = []
        self.cancelled: collections.Counter = collections.Counter()
        self.latencies: list[float] = []

    def count(self, key: str) -> None:
        with self.lock:
            self.by_kind[key] += 1

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message[:500])


def one_request(host: str, port: int, model: str, rng: random.Random, stats: Stats, cancel_share: float) -> None:
    kind, path, body, headers, stream = make_request(rng, model)
    cancel = kind != "bad" and rng.random() < cancel_share
    where = rng.choice(["before-reply", "after-headers", "mid-body"]) if cancel else None
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request("POST", path, body=body, headers=headers)
        sock = conn.sock  # http.client lets go of it once a reply says the connection closes
        if where == "before-reply":
            time.sleep(rng.uniform(0, 0.3))
            sock.shutdown(socket.SHUT_RDWR)
            stats.count(f"{kind} cancelled:{where}")
            with stats.lock:
                stats.cancelled[where] += 1
            return
        resp = conn.getresponse()
        if where == "after-headers" or (where == "mid-body" and resp.status == 200):
            if where == "mid-body":
                resp.read(rng.randint(1, 400))
            sock.shutdown(socket.SHUT_RDWR)
            stats.count(f"{kind} cancelled:{where}")
            with stats.lock:
                stats.cancelled[where] += 1
            return
        raw = resp.read()
        stats.count(f"{kind} {resp.status}")
        if resp.status >= 500:
            stats.error(f"{kind} {resp.status}: {raw[:300]!r}")
        elif kind == "bad" and not 400 <= resp.status < 500:
            stats.error(f"a bad request answered {resp.status}: {raw[:200]!r}")
        elif resp.status == 200 and stream:
            text = raw.decode("utf-8", "replace")
            done = "data: [DONE]" in text if not path.endswith("messages") else "event: message_stop" in text
            if not done or '"error"' in text.split("\n\n")[-2 if text.endswith("\n\n") else -1]:
                stats.error(f"{kind}: a stream that did not end well: {text[-300:]!r}")
        elif resp.status == 200:
            json.loads(raw)
        with stats.lock:
            stats.latencies.append(time.monotonic() - t0)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if where:  # our own cancellation can race the reply
            stats.count(f"{kind} cancelled:{where}")
            return
        stats.count(f"{kind} no-answer")
        stats.error(f"{kind}: {type(exc).__name__}: {exc}")
    finally:
        conn.close()


def rss_of(proc) -> int:
    import psutil

    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total


def get_json(host: str, port: int, path: str) -> dict:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def soak(host: str, port: int, model: str, pid: int, args) -> dict:
    import psutil

    proc = psutil.Process(pid)
    stats = Stats()
    stop = threading.Event()
    end_at = time.monotonic() + args.minutes * 60

    def client(i: int) -> None:
        rng = random.Random(args.seed * 1000 + i)
        while not stop.is_set() and time.monotonic() < end_at:
            try:
                one_request(host, port, model, rng, stats, args.cancel_share)
            except Exception as exc:  # noqa: BLE001 - the soak's own bug: counted, never a dead client
                stats.count("client-error")
                stats.error(f"the soak client failed: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    t_start = time.monotonic()
    for t in threads:
        t.start()
    samples: list[tuple[float, int]] = []
    last_report = t_start
    while time.monotonic() < end_at:
        samples.append((time.monotonic() - t_start, rss_of(proc)))
        if time.monotonic() - last_report >= 60:
            last_report = time.monotonic()
            total = sum(stats.by_kind.values())
            print(f"  {samples[-1][0] / 60:5.1f} min  RSS {samples[-1][1] / 2**20:7.1f} MiB  {total} requests  "
                  f"{len(stats.errors)} errors", flush=True)
        time.sleep(args.sample)
    stop.set()
    for t in threads:
        t.join(180)
    samples.append((time.monotonic() - t_start, rss_of(proc)))
    # after the soak: nothing left running, and a request is answered promptly
    time.sleep(2)
    health = get_json(host, port, "/health")
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode(),
        headers={"Content-Type": "application/json"})
    after_status = conn.getresponse().status
    after_s = time.monotonic() - t0
    conn.close()

    warm = args.warmup * 60
    base = [r for t, r in samples if warm <= t < warm + 60] or [samples[0][1]]
    end = [r for t, r in samples if t >= samples[-1][0] - 60]
    post = [(t, r) for t, r in samples if t >= warm]
    baseline, final = statistics.median(base), statistics.median(end)
    slope = 0.0
    if len(post) > 2:
        ts = [t for t, _ in post]
        rs = [r for _, r in post]
        mt, mr = statistics.fmean(ts), statistics.fmean(rs)
        den = sum((t - mt) ** 2 for t in ts)
        slope = sum((t - mt) * (r - mr) for t, r in post) / den if den else 0.0
    drift = (final - baseline) / baseline
    by_status = collections.Counter()
    for key, n in stats.by_kind.items():
        by_status[key.split(" ", 1)[1]] += n
    lat = sorted(stats.latencies)
    return {
        "minutes": args.minutes, "clients": args.clients, "warmup_minutes": args.warmup,
        "requests": sum(stats.by_kind.values()), "by_status": dict(by_status), "by_kind": dict(stats.by_kind),
        "cancelled": dict(stats.cancelled), "errors": len(stats.errors), "error_samples": stats.errors[:20],
        "rss_start_mib": samples[0][1] / 2**20, "rss_baseline_mib": baseline / 2**20, "rss_end_mib": final / 2**20,
        "rss_max_mib": max(r for _, r in samples) / 2**20, "rss_drift_pct": 100 * drift,
        "rss_slope_mib_per_hour": slope * 3600 / 2**20, "samples": len(samples),
        "latency_p50_s": lat[len(lat) // 2] if lat else None, "latency_p99_s": lat[int(len(lat) * 0.99)] if lat else None,
        "health_after": {k: health.get(k) for k in ("status", "scheduler") if k in health},
        "request_after": {"status": after_status, "seconds": round(after_s, 3)},
        "flat": abs(drift) <= 0.05,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=5, help="minutes before the RSS baseline")
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--cancel-share", type=float, default=0.15, help="share of requests cancelled")
    ap.add_argument("--sample", type=float, default=5, help="seconds between RSS samples")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", help="GGUF to serve (default: the default model with Qwen3's chat template)")
    ap.add_argument("--url", help="soak a running server (http://HOST:PORT) instead; --pid is then needed")
    ap.add_argument("--pid", type=int, help="the running server's process id, for its RSS")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    if args.warmup + 1 > args.minutes:
        ap.error("--minutes must leave a minute after --warmup")

    if args.url:
        if not args.pid:
            ap.error("--url needs --pid")
        host, port = args.url.split("//", 1)[-1].rstrip("/").rsplit(":", 1)
        model = get_json(host, int(port), "/v1/models")["data"][0]["id"]
        figures = soak(host, int(port), model, args.pid, args)
    else:
        from tests.sidecar.api_fuzz import served_model
        from tests.sidecar.serve_support import ServerProcess

        path = args.model or str(served_model())
        with ServerProcess(["--model", path, "--kv-slots", "2", "--ctx", "1024", "--max-queue", "16"]) as srv:
            print(f"soaking {srv.model_id} at {srv.base} (pid {srv.proc.pid}) for {args.minutes:g} min, "
                  f"{args.clients} clients", flush=True)
            figures = soak(srv.host, srv.port, srv.model_id, srv.proc.pid, args)
            figures["server_alive"] = srv.proc.poll() is None
    print(json.dumps(figures, indent=1))
    print(f"RSS {figures['rss_baseline_mib']:.1f} MiB after warm-up -> {figures['rss_end_mib']:.1f} MiB at the end "
          f"({figures['rss_drift_pct']:+.2f}%, max {figures['rss_max_mib']:.1f}, "
          f"{figures['rss_slope_mib_per_hour']:+.2f} MiB/h): {'flat' if figures['flat'] else 'NOT FLAT'}; "
          f"{figures['requests']} requests, {figures['errors']} errors")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=1)
    return 0 if figures["flat"] and not figures["errors"] and figures.get("server_alive", True) else 1


if __name__ == "__main__":
    sys.exit(main())
