"""`coli serve --upstream`, issue #47: an upstream's 4xx/5xx answer is the request's and never takes the
upstream out; only its own failures (a refused connection, silence past the deadline, a stream cut
mid-way, failed probes) count, through its circuit breaker, shown in /health and /metrics. The gateway is
the real `coli serve`; the upstreams are FakeUpstream (tests/sidecar/upstream_support.py), HTTP servers
that misbehave on cue as a remote engine would."""
from __future__ import annotations

import json
import time

import pytest

from colibri.cli import build_parser
from colibri.commands.serve import config_from_args
from colibri.errors import ColiError
from colibri.serving.breaker import BACKOFF_MAX_S, CLOSED, HALF_OPEN, OPEN, Breaker
from tests.sidecar.serve_support import ServerProcess, named_events, sse_events, wait_for
from tests.sidecar.upstream_support import FakeUpstream, free_port, get, post

HELLO = {"model": "engine", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
FAST_PROBES = {"COLI_UPSTREAM_PROBE_S": "0.3"}


def hello(i: int) -> dict:
    """A conversation of its own: no prefix shared with another, so affinity does not pin it to one upstream."""
    return {**HELLO, "messages": [{"role": "user", "content": f"hello number {i}"}]}


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_after_failures_in_a_row_and_closes_through_half_open():
    clock = Clock()
    b = Breaker(threshold=3, probe_s=2.0, clock=clock)
    assert b.state == OPEN and b.probe_due()  # nothing known before the first probe
    assert b.success(probe=True) and b.state == CLOSED  # the first probe that passes closes it: no trial
    assert not b.failure("connect", "refused") and not b.failure("timeout", "silent")
    assert b.success() is False and b.failed_requests == 0  # a request that succeeded: in a row no more
    b.failure("probe", "refused")
    b.failure("probe", "refused")
    assert b.failure("stream", "cut") is False  # requests and probes are counted apart
    assert (b.failed_requests, b.failed_probes, b.state) == (1, 2, CLOSED)
    assert b.failure("probe", "refused") and b.state == OPEN and b.reason == "probe: refused"
    assert not b.admits and not b.probe_due() and b.next_probe_in_s() == 2.0
    assert b.opened["probe"] == 1 and b.snapshot()["opened"] == 1
    assert not b.failure("stream", "cut")  # a request sent before it opened: the probes decide now
    clock.now += 2.0
    assert b.probe_due()
    waits = []
    for _ in range(5):  # each failed probe of an open upstream doubles the wait, up to BACKOFF_MAX_S
        b.failure("probe", "refused")
        waits.append(b.next_probe_in_s())
        clock.now += waits[-1]
    assert waits == [4.0, 8.0, BACKOFF_MAX_S, BACKOFF_MAX_S, BACKOFF_MAX_S]
    assert b.success(probe=True) and b.state == HALF_OPEN and b.admits  # on trial
    assert b.failure("timeout", "silent") and b.state == OPEN  # one failure on trial opens it again
    assert b.reason == "timeout: silent" and b.opened["timeout"] == 1
    clock.now += b.next_probe_in_s()
    assert b.success(probe=True) and b.state == HALF_OPEN
    assert b.success() and b.state == CLOSED and b.reason is None  # a request succeeded: closed
    assert (b.failed_requests, b.failed_probes, b.next_probe_in_s()) == (0, 0, 2.0)


def test_the_deadline_and_the_threshold_from_flag_and_variables(monkeypatch):
    def config(argv, **env):
        for name in ("COLI_UPSTREAM_TIMEOUT_S", "COLI_UPSTREAM_FAILURES"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return config_from_args(build_parser().parse_args(["serve", "--upstream", "http://gpu:8000", *argv]))

    cfg = config([])
    assert (cfg.upstream_timeout_s, cfg.upstream_failures) == (300.0, 3)
    cfg = config([], COLI_UPSTREAM_TIMEOUT_S="45", COLI_UPSTREAM_FAILURES="5")
    assert (cfg.upstream_timeout_s, cfg.upstream_failures) == (45.0, 5)
    assert config(["--upstream-timeout", "2.5"], COLI_UPSTREAM_TIMEOUT_S="45").upstream_timeout_s == 2.5
    with pytest.raises(ColiError, match="COLI_UPSTREAM_FAILURES must be >= 1"):
        config([], COLI_UPSTREAM_FAILURES="0")
    with pytest.raises(ColiError, match="--upstream-timeout must be > 0"):
        config(["--upstream-timeout", "0"])


def test_a_500_is_the_requests_own_and_the_upstream_stays_in(tmp_path):
    """(a) 500s to four requests in a row (more than the breaker's threshold) go back to their clients as
    502s naming the upstream's answer, are not retried on the other upstream, and leave both in service:
    every later request succeeds. A 400 keeps its status. A 503 (cannot serve now) is retried once."""
    plan: list[str] = []
    with FakeUpstream("engine", plan) as one, FakeUpstream("engine", plan) as two:
        with ServerProcess(["--upstream", one.url, "--upstream", two.url, "--upstream-slots", "1"]) as gw:
            plan += ["500"] * 4
            for i in range(4):
                status, _, raw = post(gw.base, "/v1/chat/completions", {**HELLO, "stream": i % 2 == 1})
                err = json.loads(raw)["error"]  # a stream that failed before its first byte: a JSON error too
                assert status == 502 and err["code"] == "scripted_500" and "answered 500" in err["message"], raw
            assert len(one.seen) + len(two.seen) == 4 and not plan  # no retry: the request's own error
            for stream in (False, True, False, True):
                status, _, raw = post(gw.base, "/v1/chat/completions", {**HELLO, "stream": stream})
                assert status == 200, raw
            plan.append("400")
            status, _, raw = post(gw.base, "/v1/chat/completions", HELLO)
            assert status == 400 and json.loads(raw)["error"]["code"] == "scripted_400"
            before = len(one.seen) + len(two.seen)
            plan.append("503")
            status, _, raw = post(gw.base, "/v1/chat/completions", HELLO)
            assert status == 200 and json.loads(raw)["choices"][0]["message"]["content"] == "Hi there", raw
            assert len(one.seen) + len(two.seen) == before + 2  # the 503, then its retry on the other one
            health = json.loads(get(gw.base, "/health")[1])
            assert health["status"] == "ok"
            for up in health["upstreams"]:
                assert up["state"] == "up" and up["breaker"]["state"] == "closed", up
                assert up["breaker"]["failed_requests"] == 0 and up["breaker"]["opened"] == 0
            metrics = get(gw.base, "/metrics")[1].decode()
            assert sum(series(metrics, "colibri_upstream_errors_total", kind="status").values()) == 5
            for url in (one.url, two.url):
                assert series(metrics, "colibri_upstream_breaker_state", upstream=url, state="closed") == {url: 1.0}
                assert series(metrics, "colibri_upstream_up", upstream=url) == {url: 1.0}


def test_a_refused_connection_counts_and_opens_the_breaker_then_it_closes_again():
    """(b) An upstream that was never there (nothing listens on its port) is open from the start, named in
    /health with the reason; one that goes away mid-service costs no request (each is retried on the one
    left) and its breaker opens; started again, it is probed back in (half-open, then closed)."""
    nowhere = f"http://127.0.0.1:{free_port()}"
    with FakeUpstream("engine") as live, FakeUpstream("engine") as leaving:
        with ServerProcess(["--upstream", live.url, "--upstream", leaving.url, "--upstream", nowhere,
                            "--upstream-slots", "1"], env=FAST_PROBES) as gw:
            health = json.loads(get(gw.base, "/health")[1])
            absent = breaker_of(health, nowhere)
            assert health["status"] == "degraded" and absent["state"] == "open", absent
            assert absent["reason"].startswith("probe: ") and "onnect" in absent["reason"], absent
            assert absent["next_probe_in_s"] <= 15 and absent["next_probe_at"] > time.time() - 1
            leaving.stop()
            for i in range(6):
                status, _, raw = post(gw.base, "/v1/chat/completions", hello(i))
                assert status == 200, raw  # refused there: retried on the live one before any byte
            assert wait_for(lambda: breaker_of(json.loads(get(gw.base, "/health")[1]), leaving.url)["state"]
                            == "open", timeout=10)
            gone = breaker_of(json.loads(get(gw.base, "/health")[1]), leaving.url)
            assert gone["reason"].split(":")[0] in ("connect", "probe") and gone["opened"] == 1, gone
            metrics = get(gw.base, "/metrics")[1].decode()
            assert series(metrics, "colibri_upstream_breaker_state", upstream=leaving.url, state="open") == {
                leaving.url: 1.0}
            assert series(metrics, "colibri_upstream_up", upstream=leaving.url) == {leaving.url: 0.0}
            assert sum(series(metrics, "colibri_upstream_breaker_opened_total", upstream=leaving.url).values()) == 1
            assert series(metrics, "colibri_upstream_breaker_next_probe_seconds", upstream=nowhere)[nowhere] <= 15
            leaving.start()
            assert wait_for(lambda: breaker_of(json.loads(get(gw.base, "/health")[1]), leaving.url)["state"]
                            == "closed", timeout=20)
            served = len(leaving.seen)
            for i in range(4):
                assert post(gw.base, "/v1/chat/completions", hello(10 + i))[0] == 200
            assert len(leaving.seen) > served  # it takes requests again


def test_an_upstream_silent_past_the_deadline_times_out_and_opens_the_breaker():
    """(c) A request the upstream never answers is a 504 upstream_timeout after --upstream-timeout, though its
    health probe still passes; three in a row open its breaker (requests then get a 503 at once); a probe
    puts it on trial and the next request that succeeds closes it. A stream that goes silent mid-way ends
    with an error event."""
    plan = ["hang"] * 3
    with FakeUpstream("engine", plan) as up:
        with ServerProcess(["--upstream", up.url, "--upstream-timeout", "1"],
                           env={"COLI_UPSTREAM_PROBE_S": "2"}) as gw:
            for i in range(3):
                t0 = time.monotonic()
                status, _, raw = post(gw.base, "/v1/chat/completions", HELLO)
                assert status == 504 and json.loads(raw)["error"]["code"] == "upstream_timeout", raw
                assert 0.9 < time.monotonic() - t0 < 10
            b = breaker_of(json.loads(get(gw.base, "/health")[1]), up.url)
            assert b["state"] == "open" and b["reason"].startswith("timeout: ") and b["failed_requests"] == 3, b
            t0 = time.monotonic()
            status, _, raw = post(gw.base, "/v1/chat/completions", HELLO)
            assert status == 503 and json.loads(raw)["error"]["code"] == "upstream_unavailable", raw
            assert time.monotonic() - t0 < 1 and "timeout" in json.loads(raw)["error"]["message"]
            metrics = get(gw.base, "/metrics")[1].decode()
            assert series(metrics, "colibri_upstream_breaker_opened_total", upstream=up.url,
                          reason="timeout") == {up.url: 1.0}
            assert series(metrics, "colibri_upstream_breaker_failures", upstream=up.url, of="requests") == {
                up.url: 3.0}
            assert sum(series(metrics, "colibri_upstream_errors_total", kind="timeout").values()) == 3
            assert wait_for(lambda: breaker_of(json.loads(get(gw.base, "/health")[1]), up.url)["state"]
                            == "half_open", timeout=10)
            assert post(gw.base, "/v1/chat/completions", HELLO)[0] == 200
            assert breaker_of(json.loads(get(gw.base, "/health")[1]), up.url)["state"] == "closed"
            plan.append("stall")
            status, _, raw = post(gw.base, "/v1/chat/completions", {**HELLO, "stream": True})
            events = sse_events(raw)
            assert status == 200 and "[DONE]" not in events
            assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]) == "Hi there"
            assert events[-1]["error"]["code"] == "upstream_timeout", events[-1]


def test_an_upstream_that_dies_mid_stream_ends_the_stream_cleanly_and_the_next_request_goes_elsewhere():
    """(d) The upstream serving a stream closes its socket after two chunks and goes away: the client has the
    chunks, then one OpenAI error event (upstream_stream_broken) and no [DONE]; the next requests go to the
    other upstream; the dead one's breaker opens. An Anthropic stream cut mid-way gets its `error` event."""
    plan = ["die"]
    with FakeUpstream("engine", plan) as one, FakeUpstream("engine", plan) as two:
        with ServerProcess(["--upstream", one.url, "--upstream", two.url], env=FAST_PROBES) as gw:
            status, headers, raw = post(gw.base, "/v1/chat/completions", {**HELLO, "stream": True})
            assert status == 200 and headers["content-type"].startswith("text/event-stream")
            events = sse_events(raw)
            assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]) == "Hi there"
            err = events[-1]["error"]
            assert err["code"] == "upstream_stream_broken" and err["type"] == "server_error", events[-1]
            assert "[DONE]" not in events
            dead, alive = (one, two) if one.seen else (two, one)
            assert len(dead.seen) == 1 and not alive.seen
            for stream in (False, True, False):
                status, _, raw = post(gw.base, "/v1/chat/completions", {**HELLO, "stream": stream})
                assert status == 200, raw
                assert sse_events(raw)[-1] == "[DONE]" if stream else json.loads(raw)["choices"]
            assert len(alive.seen) == 3 and len(dead.seen) == 1
            assert wait_for(lambda: breaker_of(json.loads(get(gw.base, "/health")[1]), dead.url)["state"]
                            == "open", timeout=10)
            health = json.loads(get(gw.base, "/health")[1])
            assert health["status"] == "degraded" and breaker_of(health, alive.url)["state"] == "closed"
            metrics = get(gw.base, "/metrics")[1].decode()
            assert series(metrics, "colibri_upstream_errors_total", kind="stream", upstream=dead.url) == {
                dead.url: 1.0}
            assert series(metrics, "colibri_upstream_breaker_state", upstream=dead.url, state="open") == {
                dead.url: 1.0}
            plan.append("cut")
            status, _, raw = post(gw.base, "/v1/messages", {**HELLO, "stream": True},
                                  {"anthropic-version": "2023-06-01"})
            names = named_events(raw.decode())
            assert status == 200 and names[-1][0] == "error" and "message_stop" not in [n for n, _ in names]
            assert "failed mid-reply" in names[-1][1]["error"]["message"], names[-1]
            assert breaker_of(json.loads(get(gw.base, "/health")[1]), alive.url)["state"] == "closed"  # one cut


def test_a_stream_lost_before_its_first_chunk_is_retried_elsewhere():
    """(e) The upstream answers a stream's headers and closes its socket before any chunk (llama-server sends
    them before its prefill, and was killed during it): nothing went out to the client, so the request is
    retried once on the other upstream and answered whole; the loss counts on the first one's breaker, the
    request once in the scheduler. Where no other upstream is left, the client gets the named 502."""
    plan: list[str] = []
    with FakeUpstream("engine", plan) as one, FakeUpstream("engine", plan) as two:
        with ServerProcess(["--upstream", one.url, "--upstream", two.url, "--upstream-slots", "1"],
                           env={"COLI_UPSTREAM_PROBE_S": "60"}) as gw:
            before = json.loads(get(gw.base, "/health")[1])["scheduler"]
            plan.append("drop")
            status, _, raw = post(gw.base, "/v1/chat/completions", {**HELLO, "stream": True})
            events = sse_events(raw)
            assert status == 200 and events[-1] == "[DONE]", raw
            assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1] if e["choices"]) == \
                "Hi there"
            assert not plan and len(one.seen) == len(two.seen) == 1  # the drop, then the retry on the other
            health = json.loads(get(gw.base, "/health")[1])
            dropped = one.url if breaker_of(health, one.url)["failed_requests"] else two.url
            assert breaker_of(health, dropped)["failed_requests"] == 1
            counts = {k: health["scheduler"][k] - before[k] for k in ("admitted", "completed", "failed")}
            assert counts == {"admitted": 1, "completed": 1, "failed": 0} and health["scheduler"]["active"] == 0
            plan += ["drop", "drop"]  # dropped there, and again on the retry: the request's error, named
            status, _, raw = post(gw.base, "/v1/chat/completions", {**HELLO, "stream": True})
            assert status == 502 and json.loads(raw)["error"]["code"] == "upstream_stream_broken", raw
            assert not plan and json.loads(get(gw.base, "/health")[1])["scheduler"]["active"] == 0


def breaker_of(health: dict, url: str) -> dict:
    return next(u["breaker"] for u in health["upstreams"] if u["url"] == url)


def series(metrics: str, name: str, **labels: str) -> dict[str, float]:
    """{upstream: value} of the samples of `name` whose labels include `labels`."""
    out = {}
    for line in metrics.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, value = line.rsplit(" ", 1)
        found = dict(pair.split("=", 1) for pair in head[len(name) + 1:-1].split(","))
        found = {k: v.strip('"') for k, v in found.items()}
        if all(found.get(k) == v for k, v in labels.items()):
            out[found["upstream"]] = out.get(found["upstream"], 0.0) + float(value)
    return out
