"""`coli serve --models-dir`: a real server over a folder of tiny real models, switched by the
`model` a request names (docs in README.md#models)."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest

from colibri.errors import ColiError
from tests.engine.tiny_models import write_tiny
from tests.sidecar.serve_support import ServerProcess
from tests.sidecar.test_serve_cli import config


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("library")
    models = root / "models"
    models.mkdir()
    write_tiny(models / "alpha.gguf", family="qwen2")
    write_tiny(models / "beta.gguf", family="llama", seed=1)
    write_tiny(models / "alien.gguf", arch="mamba9")  # the engine refuses it at load, with its reason
    (root / "home").mkdir()
    env = {"HOME": str(root / "home"), "COLI_DATA_DIR": str(root / "data"), "COLI_CACHE_DIR": str(root / "cache"),
           "HF_HOME": str(root / "hf"), "LLAMA_CACHE": str(root / "llama"), "COLI_MODELS_DIR": ""}
    args = ["--model", str(models / "alpha.gguf"), "--models-dir", str(models), "--max-models", "1",
            "--queue-timeout", "20"]
    with ServerProcess(args, env=env) as srv:
        srv.models = models
        yield srv


def complete(srv, model: str, max_tokens: int = 4, stream: bool = False):
    return srv.post("/v1/completions", {"model": model, "prompt": "hello world", "max_tokens": max_tokens,
                                        "stream": stream})


def ids(srv) -> list[str]:
    status, _, raw = srv.get("/v1/models")
    assert status == 200
    return [m["id"] for m in json.loads(raw)["data"]]


def test_a_request_naming_another_model_switches_to_it(library):
    srv = library
    assert srv.model_id == "alpha" and "more model(s) on request" in srv.output()
    assert ids(srv)[0] == "alpha" and "beta" in ids(srv) and "alien" not in ids(srv)  # the engine's check said no
    status, _, body = complete(srv, "alpha")
    assert status == 200 and body["model"] == "alpha"
    t0 = time.perf_counter()
    status, _, body = complete(srv, "beta")
    switch_s = time.perf_counter() - t0
    assert status == 200 and body["model"] == "beta", body
    print(f"switch alpha -> beta with a completion: {switch_s * 1000:.0f} ms")
    health = json.loads(srv.get("/health")[2])
    assert health["model"] == "beta" and health["arch"] == "llama"
    assert health["library"]["active"] == "beta" and health["library"]["resident"] == ["beta"]  # one at a time
    status, _, body = complete(srv, "alpha")  # unloaded, so loaded again
    assert status == 200 and body["model"] == "alpha"


def test_unknown_and_unrunnable_models_are_named_errors(library):
    srv = library
    status, _, body = complete(srv, "no-such-model")
    assert status == 404 and body["error"]["code"] == "model_not_found" and body["error"]["param"] == "model"
    status, _, body = complete(srv, "alien")  # refused before any load: the engine's binding check named it
    assert status == 400 and body["error"]["code"] == "model_not_runnable"
    assert "architecture 'mamba9'" in body["error"]["message"]
    status, _, body = complete(srv, "beta")  # the server still serves
    assert status == 200 and body["model"] == "beta"


def test_a_request_for_another_model_waits_for_the_running_one(library):
    srv = library
    assert complete(srv, "alpha")[0] == 200
    done: dict[str, float] = {}

    def long_alpha() -> None:
        status, _, _ = srv.request("POST", "/v1/completions", json.dumps(
            {"model": "alpha", "prompt": "hello", "max_tokens": 400, "temperature": 0}).encode(),
            {"Content-Type": "application/json"})
        done["alpha"] = time.perf_counter()
        assert status == 200

    t = threading.Thread(target=long_alpha)
    t.start()
    time.sleep(0.05)
    status, _, body = complete(srv, "beta")
    done["beta"] = time.perf_counter()
    t.join()
    assert status == 200 and body["model"] == "beta"
    assert done["alpha"] <= done["beta"]


def test_dashboard_models_endpoints(library):
    srv = library
    status, _, raw = srv.get("/api/models")
    listing = json.loads(raw)
    assert status == 200 and listing["library"] is True
    rows = {r["id"]: r for r in listing["models"]}
    assert rows[listing["active"]]["state"] == "active"
    other = "alpha" if listing["active"] == "beta" else "beta"
    assert rows[other]["state"] == "available" and rows[other]["plan"]["placement"] == "resident"
    assert rows["alien"]["runnable"] is False
    status, _, body = srv.post(f"/api/models/{other}/load", {})
    assert status == 200 and body["active"] == other and body["pool"]["loading"] is None
    status, _, body = srv.post(f"/api/models/{other}/unload", {})
    assert status == 409 and body["error"]["code"] == "model_active"
    status, _, body = srv.post("/api/models/nope/load", {})
    assert status == 404 and body["error"]["code"] == "model_not_found"


def test_concurrent_requests_for_two_models_each_get_their_own(library):
    srv = library
    results: list[tuple[str, int, str]] = []

    def one(model: str) -> None:
        status, _, body = complete(srv, model, max_tokens=8)
        results.append((model, status, body.get("model") if status == 200 else body["error"]["code"]))

    threads = [threading.Thread(target=one, args=(m,)) for m in ["alpha", "beta"] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(status == 200 and got == asked for asked, status, got in results), results


def test_health_shows_the_load_and_its_bytes(library):
    srv = library
    big = srv.models / "big.gguf"  # a tiny model with 512 MiB past its data (sparse): a load long enough to watch
    big.write_bytes((srv.models / "beta.gguf").read_bytes())
    with big.open("r+b") as f:
        f.truncate(512 << 20)
    seen: list[dict] = []
    loader = threading.Thread(target=lambda: seen.append(srv.post("/api/models/big/load", {})[2]))
    loader.start()
    states = []
    while loader.is_alive():
        health = json.loads(srv.get("/health")[2])
        states.append((health["status"], health["library"]["loading"]))
        time.sleep(0.005)
    loader.join()
    assert seen and seen[0]["active"] == "big", seen
    loading = [l for status, l in states if status == "loading" and l]
    assert loading, states[:5]  # between the two models: no model, the one loading and how far
    assert {l["model"] for l in loading} == {"big"} and all(l["bytes_total"] == 512 << 20 for l in loading)
    assert all(l["phase"] in ("planning", "reading", "opening") for l in loading)
    status, _, body = complete(srv, "alpha")
    assert status == 200 and body["model"] == "alpha"


def test_library_flags_and_variables(monkeypatch, tmp_path):
    for name in ("COLI_MODELS_DIR", "COLI_MAX_MODELS", "COLI_MODEL_TTL"):
        monkeypatch.delenv(name, raising=False)
    cfg = config([], monkeypatch)
    assert (cfg.models_dirs, cfg.max_models, cfg.model_ttl) == ((), 1, 0.0)  # one model, as before
    cfg = config(["--models-dir", "a", "--models-dir", "b", "--max-models", "2", "--model-ttl", "10m"], monkeypatch)
    assert (cfg.models_dirs, cfg.max_models, cfg.model_ttl) == (("a", "b"), 2, 600.0)
    cfg = config([], monkeypatch, {"COLI_MODELS_DIR": f"x{os.pathsep}y", "COLI_MAX_MODELS": "3", "COLI_MODEL_TTL": "90s"})
    assert (cfg.models_dirs, cfg.max_models, cfg.model_ttl) == (("x", "y"), 3, 90.0)
    with pytest.raises(ColiError, match="--model-ttl 'soon'"):
        config(["--model-ttl", "soon"], monkeypatch)
    with pytest.raises(ColiError, match="--max-models must be >= 1"):
        config(["--max-models", "0"], monkeypatch)


def test_max_models_keeps_two_loaded_and_the_ttl_unloads_the_idle_one(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    write_tiny(models / "alpha.gguf", family="qwen2")
    write_tiny(models / "beta.gguf", family="llama", seed=1)
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "COLI_DATA_DIR": str(tmp_path / "data"),
           "COLI_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"), "COLI_MODELS_DIR": ""}
    args = ["--model", str(models / "alpha.gguf"), "--models-dir", str(models), "--max-models", "2",
            "--model-ttl", "1s"]
    with ServerProcess(args, env=env) as srv:
        assert complete(srv, "beta")[0] == 200
        library = json.loads(srv.get("/health")[2])["library"]
        assert library["resident"] == ["alpha", "beta"] and library["active"] == "beta"
        status, _, body = srv.post("/api/models/alpha/unload", {})  # idle, not active: the Unload button
        assert status == 200 and body["pool"]["resident"] == ["beta"]
        assert complete(srv, "alpha")[0] == 200  # beta stays loaded, idle, until the TTL
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and json.loads(srv.get("/health")[2])["library"]["resident"] != ["alpha"]:
            time.sleep(0.1)
        assert json.loads(srv.get("/health")[2])["library"]["resident"] == ["alpha"]  # the active one stays
