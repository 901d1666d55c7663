"""The dashboard's feeds on a real server (a tiny qwen3moe whose experts stream
from disk through a one-expert-per-layer cache): /health's placement fields,
/experts (tiers, heat, hits, counts), /profile (turn records), the /events
stream, the API key on all of them, and the same text as with every expert
resident."""
from __future__ import annotations

import base64
import json
import struct
import threading

import pytest

from tests.fixtures import moe_models
from tests.sidecar.serve_support import ServerProcess

PROMPT = "hello world hello"


@pytest.fixture(scope="module")
def moe_model():
    return moe_models.tiny("qwen3moe", "Q8_0")


def complete(srv, **kw):
    status, _, body = srv.post("/v1/completions", {"model": srv.model_id, "prompt": PROMPT, "max_tokens": 12,
                                                   "temperature": 0, **kw})
    assert status == 200, body
    return body


def test_feeds_on_a_streaming_server(moe_model, tmp_path):
    env = {"COLI_CACHE_DIR": str(tmp_path / "cache")}
    with ServerProcess(["--model", str(moe_model), "--expert-cache-gb", "0.000001", "--pin-gb", "0"], env=env) as srv:
        status, _, raw = srv.get("/health")
        health = json.loads(raw)
        assert health["moe"]["rows"] == 3 and health["moe"]["cols"] == 8 and health["moe"]["layers"] == [0, 1, 2]
        tiers = health["tiers"]
        assert tiers["disk"] + tiers["ram"] + tiers["pinned"] + tiers["vram"] == 24
        assert health["cache"]["budget_gb"] > 0 and health["cache"]["hit_rate"] is None

        events: list[tuple[str, dict]] = []
        got_turn = threading.Event()

        def listen():
            conn = srv.connection(timeout=60)
            conn.request("GET", "/events")
            resp = conn.getresponse()
            name = None
            while not got_turn.is_set():
                line = resp.readline().decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    events.append((name, json.loads(line[6:])))
                    if name == "turn":
                        got_turn.set()
            conn.close()

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        streamed = complete(srv)["choices"][0]["text"]
        assert got_turn.wait(30), events
        kinds = {name for name, _ in events}
        assert {"routing", "turn"} <= kinds
        routing = next(d for n, d in events if n == "routing")
        assert routing["rows"] == 3 and len(base64.b64decode(routing["hits"])) == 3

        status, _, raw = srv.get("/experts?counts=1")
        feed = json.loads(raw)
        assert status == 200 and feed["v"] == 1 and feed["rows"] == 3 and feed["cols"] == 8
        cells = base64.b64decode(feed["map"])
        assert len(cells) == 24 and all(c >> 6 in (0, 1, 3) for c in cells) and any(c & 63 for c in cells)
        assert any(base64.b64decode(feed["hits"]))
        counts = struct.unpack("<24I", base64.b64decode(feed["counts"]))
        assert sum(counts) == feed["tokens"] * 3 * 2  # every token, every MoE layer, top-2

        status, _, raw = srv.get("/profile")
        profile = json.loads(raw)
        turn = profile["turns"][-1]
        assert profile["seq"] == turn["id"] and turn["completion_tokens"] == 12
        assert turn["bytes_read"] > 0 and 0 <= turn["cache_hit_rate"] <= 1 and turn["wall_s"] > 0
        for key in ("expert_wait_s", "expert_matmul_s", "attention_s", "lm_head_s", "expert_disk_s", "prefill_s", "t"):
            assert turn[key] >= 0, key
        status, _, raw = srv.get("/health")
        assert json.loads(raw)["cache"]["bytes_read"] > 0
        status, _, raw = srv.get("/experts/coroute?k=4")
        co = json.loads(raw)
        assert co["tokens"] == feed["tokens"] and co["k"] == 4
        nbr = struct.unpack("<96I", base64.b64decode(co["nbr"]))
        w = base64.b64decode(co["w"])
        assert len(w) == 96 and max(w) == 255
        for cell in range(24):  # partners in the same or a neighbouring row, never itself
            for j in range(4):
                p = nbr[cell * 4 + j]
                if w[cell * 4 + j]:
                    assert p != cell and abs(p // 8 - cell // 8) <= 1
                else:
                    assert p == 0xFFFFFFFF
    with ServerProcess(["--model", str(moe_model)], env=env) as srv:  # every expert resident
        resident = complete(srv)["choices"][0]["text"]
        health = json.loads(srv.get("/health")[2])
        assert health["tiers"]["ram"] == 24
    assert resident == streamed
    assert list((tmp_path / "cache" / "heat").glob("*.heat"))  # routing heat kept for the next run's pins


def test_feeds_need_the_api_key(moe_model, tmp_path):
    with ServerProcess(["--model", str(moe_model), "--api-key", "sekret"],
                       env={"COLI_CACHE_DIR": str(tmp_path)}) as srv:
        for path in ("/experts", "/profile", "/events", "/experts/coroute"):
            assert srv.get(path)[0] == 401, path
        status, _, raw = srv.get("/experts", headers={"Authorization": "Bearer sekret"})
        assert status == 200 and json.loads(raw)["rows"] == 3
        assert json.loads(srv.get("/health")[2]) == {"status": "ok"}
