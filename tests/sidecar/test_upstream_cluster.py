"""`coli serve --upstream` in front of three upstream engines as a cluster would have them: each in a network
namespace of its own with its own address (tests/sidecar/netns_support.py: a bridge, veth pairs), each
running llama.cpp's llama-server on the tests' default model (llama-cpp-python's server where llama-server was
not built: then the prefix test, which reads llama-server's cached-token counts, skips).

- prefix affinity: a multi-turn conversation's next turn goes to the upstream that holds its prefix; the share
  of prompt tokens the upstreams found in their KV cache through the gateway, against the same conversations
  sent straight at the upstreams in turn (round robin);
- failover: one upstream killed under load: no request lost that had not started streaming, those that had end
  with a clean error event, and the next requests go to the two left.
Skipped, saying why, where network namespaces cannot be made (not root)."""
from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading

import pytest

from tests.sidecar.llama_server_support import LlamaCppServer
from tests.sidecar.netns_support import Hosts, netns_unavailable
from tests.sidecar.serve_support import ServerProcess, sse_events, wait_for
from tests.sidecar.upstream_support import connection, get, post

PORT = 8080  # each host has its own address: the same port on each, as on machines


class LlamaCppPythonServer:
    """llama-cpp-python's server on a host: the stand-in where llama-server was not built."""

    slots = 1  # it runs one request at a time

    def __init__(self, model: str, host: str, prefix: list[str]):
        self.model_id = model
        self.url = f"http://{host}:{PORT}"
        argv = [*prefix, sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", host, "--port",
                str(PORT), "--n_ctx", "2048", "--interrupt_requests", "False", "--verbose", "False"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(self.ready, 120, 0.2) or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError(f"llama_cpp.server did not start on {self.url}")

    def ready(self) -> bool:
        try:
            return self.proc.poll() is not None or get(self.url, "/v1/models")[0] == 200
        except OSError:
            return False

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def llama_server() -> str | None:
    path = os.environ.get("COLI_LLAMA_SERVER")
    return path if path and os.access(path, os.X_OK) else None


@pytest.fixture(scope="module")
def hosts():
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with Hosts(3) as made:
        yield made


@pytest.fixture(scope="module")
def engines(hosts, default_model):
    """One engine per host: llama-server with two slots, else llama-cpp-python's server (one)."""
    binary = llama_server()
    started = []
    try:
        for host in hosts.all:
            if binary:
                started.append(LlamaCppServer(binary, default_model, host=host.address, port=PORT, parallel=2,
                                              prefix=host.run).start())
            else:
                pytest.importorskip("llama_cpp.server.app")
                started.append(LlamaCppPythonServer(str(default_model), host.address, host.run))
        yield started
    finally:
        for engine in started:
            engine.kill()


def gateway_args(engines) -> list[str]:
    return [arg for e in engines for arg in ("--upstream", e.url)] + ["--upstream-slots", str(slots(engines))]


def slots(engines) -> int:
    """How many requests each engine runs at once: the gateway sends it as many."""
    first = engines[0]
    return first.parallel if isinstance(first, LlamaCppServer) else first.slots


SYSTEM = "You are a guide to the cities of Europe. Answer in one short sentence. "
CITIES = ["Paris", "Rome", "Vienna", "Lisbon"]
QUESTIONS = ["What is {} known for?", "And its food?", "And its river?", "And one museum there?"]


def conversation_turns(send, run: str) -> list[list[dict]]:
    """Four conversations, interleaved turn by turn (as users chat at once), each turn the whole history so far;
    `send(body)` returns the reply (OpenAI's JSON). Each conversation's replies' usage, turn by turn. `run` leads
    the prompts: no run finds another's in a cache."""
    histories = [[{"role": "system", "content": f"{run}. " + SYSTEM + f"The user asks about {city}. " * 6}]
                 for city in CITIES]
    usages: list[list[dict]] = [[] for _ in CITIES]
    for question in QUESTIONS:
        for city, history, usage in zip(CITIES, histories, usages):
            history.append({"role": "user", "content": question.format(city)})
            reply = send({"messages": history, "max_tokens": 6, "temperature": 0})
            history.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"]})
            usage.append(reply["usage"])
    return usages


def cached(usage: dict) -> int:
    """The prompt tokens the upstream found in its cache (llama-server's usage; its `timings.cache_n`)."""
    return (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0


def cached_share(usages: list[list[dict]]) -> float:
    """Of the prompt tokens of every turn after the first, the share the upstreams found in their cache."""
    later = [u for turns in usages for u in turns[1:]]
    return sum(cached(u) for u in later) / sum(u["prompt_tokens"] for u in later)


def test_a_conversation_goes_where_its_prefix_is(engines):
    if not llama_server():
        pytest.skip("llama-cpp-python's server reports no cached tokens: this needs llama-server (COLI_LLAMA_SERVER)")
    model = engines[0].model_id
    turn = [0]

    def round_robin(body):
        engine = engines[turn[0] % len(engines)]
        turn[0] += 1
        status, _, raw = post(engine.url, "/v1/chat/completions", {**body, "model": model})
        assert status == 200, raw
        return json.loads(raw)

    straight = cached_share(conversation_turns(round_robin, "Round robin"))
    with ServerProcess(gateway_args(engines)) as gw:
        def through(body):
            status, _, raw = post(gw.base, "/v1/chat/completions", {**body, "model": model})
            assert status == 200, raw
            return json.loads(raw)

        usages = conversation_turns(through, "Through the gateway")
        affinity = cached_share(usages)
        turns = json.loads(get(gw.base, "/profile")[1])["turns"]
    by_conversation = {}
    for i, row in enumerate(turns[-len(CITIES) * len(QUESTIONS):]):  # in the order sent: city i % 4
        by_conversation.setdefault(i % len(CITIES), set()).add(row["upstream"])
    assert all(len(ups) == 1 for ups in by_conversation.values()), by_conversation  # each kept its upstream
    # each turn found (nearly) all of the turn before it in the cache: its upstream held the prefix
    held = [cached(now) / before["prompt_tokens"] for turns in usages for before, now in zip(turns, turns[1:])]
    assert min(held) > 0.9, [[(u["prompt_tokens"], cached(u)) for u in turns] for turns in usages]
    print(f"cached share of the prompt tokens of turns 2-4: through the gateway {affinity:.2f}, "
          f"round robin {straight:.2f}")
    assert affinity > 0.6 and affinity > 2 * straight, (affinity, straight)


def has_content(line: bytes) -> bool:
    if not line.startswith(b"data: {"):
        return False
    chunk = json.loads(line[6:])
    return any(c.get("text") for c in chunk.get("choices") or [])


class Client(threading.Thread):
    """One streamed completion through the gateway (legacy /v1/completions: Gemma 3 270M's chat ends at once on
    llama-cpp-python's server): what arrived, and whether text had arrived."""

    def __init__(self, base: str, model: str, i: int):
        super().__init__(daemon=True)
        self.base, self.i = base, i
        self.body = {"model": model, "prompt": f"Request {i}. Once upon a time, in a land far away,",
                     "max_tokens": 96, "temperature": 0, "stream": True}
        self.status = 0
        self.raw = b""
        self.started = threading.Event()  # a chunk with content has arrived

    def run(self) -> None:
        conn = connection(self.base, timeout=120)
        try:
            conn.request("POST", "/v1/completions", json.dumps(self.body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            self.status = resp.status
            while True:
                line = resp.readline()
                if not line:
                    break
                self.raw += line
                if has_content(line):
                    self.started.set()
        except (OSError, http.client.HTTPException) as exc:
            self.raw += f"\n(client: {exc!r})".encode()
        finally:
            conn.close()


def test_failover_when_an_upstream_is_killed_under_load(hosts, engines, default_model):
    """Twelve streams at once over three upstreams (llama-server: two slots each, six run, six wait); one
    upstream killed while its streams run: those end with an upstream_stream_broken event after what they had; every
    other request is answered whole (those queued go to the two left, or are retried there when they meet the
    dead one first); the next requests go to the two left, the dead one's breaker open."""
    victim = engines[-1]
    try:
        with ServerProcess(gateway_args(engines) + ["--max-queue", "12"], env={"COLI_UPSTREAM_PROBE_S": "0.5"}) as gw:
            model = engines[0].model_id
            clients = [Client(gw.base, model, i) for i in range(12)]
            for c in clients:
                c.start()
            # every slot streaming (the victim's included), the rest waiting in the queue
            running = slots(engines)
            assert wait_for(lambda: sum(c.started.is_set() for c in clients) >= 3 * running, timeout=120)
            started_before = {c.i for c in clients if c.started.is_set()}
            victim.kill()
            for c in clients:
                c.join(180)
            broken, whole = [], []
            for c in clients:
                assert c.status == 200, c.raw[-400:]
                events = sse_events(c.raw)
                if events and events[-1] == "[DONE]":
                    whole.append(c.i)
                    continue
                errors = [e["error"] for e in events if isinstance(e, dict) and e.get("error")]
                assert errors and errors[-1]["code"] == "upstream_stream_broken", c.raw[-400:]
                assert c.i in started_before or c.started.is_set(), f"request {c.i} lost before it streamed"
                broken.append(c.i)
            print(f"killed under load: {len(whole)} requests answered whole, {len(broken)} streams broken "
                  f"(of {len(started_before)} streaming at the kill)")
            assert len(broken) == running and len(whole) == 12 - running, (broken, whole)  # the ones it streamed
            assert wait_for(lambda: json.loads(get(gw.base, "/health")[1])["status"] == "degraded", timeout=30)
            before = {u["url"]: u["requests"] for u in json.loads(get(gw.base, "/health")[1])["upstreams"]}
            for i in range(4):
                status, _, raw = post(gw.base, "/v1/completions", {"model": model, "max_tokens": 4,
                                                                   "prompt": f"After {i}, the"})
                assert status == 200, raw
            health = json.loads(get(gw.base, "/health")[1])
            after = {u["url"]: u["requests"] for u in health["upstreams"]}
            assert after[victim.url] == before[victim.url] and sum(after.values()) == sum(before.values()) + 4
            states = {u["url"]: u["breaker"]["state"] for u in health["upstreams"]}
            assert states[victim.url] == "open" and list(states.values()).count("closed") == 2, states
    finally:
        victim.kill()
        engines[-1] = restart(victim, hosts, default_model)


def restart(engine, hosts, default_model):
    """The killed engine back on its host, for the tests after this one."""
    binary = llama_server()
    host = hosts.all[-1]
    if binary:
        return LlamaCppServer(binary, default_model, host=host.address, port=PORT, parallel=2, prefix=host.run).start()
    return LlamaCppPythonServer(str(default_model), host.address, host.run)
