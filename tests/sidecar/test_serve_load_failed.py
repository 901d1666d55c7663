"""A library model that fails its real load: 500 model_load_failed, and the model it was to replace
comes back (a server always serves one). Real server, real engine, tiny real models.

The engine's binding check (colibri_gguf_check, run when the library reads a folder) opens the
file as a load would, tokenizer, family, every tensor bound and its data inside the file, so a file
it passed loads unless it changed in between. The library keeps what it read for a few seconds
(colibri.serving.pool.RESCAN_S): a file cut short after that read is what reaches the load here,
as a download or copy still being written would."""
from __future__ import annotations

import json

from tests.engine.tiny_models import write_tiny
from tests.sidecar.serve_support import ServerProcess


def _ids(srv) -> list[str]:
    status, _, raw = srv.get("/v1/models")
    assert status == 200
    return [m["id"] for m in json.loads(raw)["data"]]


def _complete(srv, model: str | None):
    body = {"prompt": "hello world", "max_tokens": 4}
    if model:
        body["model"] = model
    return srv.post("/v1/completions", body)


def test_a_model_that_fails_its_load_is_a_500_and_the_previous_model_comes_back(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    write_tiny(models / "alpha.gguf", family="qwen2")
    beta = write_tiny(models / "beta.gguf", family="llama", seed=1)
    (tmp_path / "home").mkdir()
    env = {"HOME": str(tmp_path / "home"), "COLI_DATA_DIR": str(tmp_path / "data"),
           "COLI_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"),
           "LLAMA_CACHE": str(tmp_path / "llama"), "COLI_MODELS_DIR": ""}
    args = ["--model", str(models / "alpha.gguf"), "--models-dir", str(models), "--max-models", "1",
            "--queue-timeout", "20"]
    with ServerProcess(args, env=env) as srv:
        assert srv.model_id == "alpha"
        assert _complete(srv, "alpha")[0] == 200
        assert "beta" in _ids(srv)  # read now: the check passed it
        with beta.open("r+b") as f:  # ... and now its last tensor runs past the end of the file
            f.truncate(beta.stat().st_size - 4096)

        status, _, body = _complete(srv, "beta")
        assert status == 500, body
        err = body["error"]
        assert err["code"] == "model_load_failed" and err["param"] == "model", err
        assert "'beta' failed to load" in err["message"] and "truncated" in err["message"], err

        health = json.loads(srv.get("/health")[2])  # alpha was unloaded to make room; it is back
        assert health["status"] == "ok" and health["model"] == "alpha", health
        assert health["library"]["active"] == "alpha" and health["library"]["resident"] == ["alpha"], health
        for model in (None, "alpha"):  # and serves, named or not
            status, _, body = _complete(srv, model)
            assert status == 200 and body["model"] == "alpha", body

        # the library read the folder again: beta is listed as not runnable, with the engine's reason
        assert "beta" not in _ids(srv)
        rows = {r["id"]: r for r in json.loads(srv.get("/api/models")[2])["models"]}
        assert rows["beta"]["runnable"] is False and "truncated" in rows["beta"]["reason"], rows.get("beta")
        status, _, body = _complete(srv, "beta")
        assert status == 400 and body["error"]["code"] == "model_not_runnable", body
        assert _complete(srv, None)[0] == 200
