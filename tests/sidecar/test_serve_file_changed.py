"""The model file truncated under a running `coli serve` (a re-download over
the same path, a drive that drops): the stream in flight ends (a named
error in the log), the server stays up, /health says the file changed, and every later
generation is refused with 503 model_file_changed — no SIGBUS, no 500."""
from __future__ import annotations

import http.client
import json
import os
import shutil

import pytest

from tests.fixtures import moe_models as mm
from tests.sidecar.serve_support import ServerProcess, wait_for

pytest.importorskip("gguf")


@pytest.mark.parametrize("stream_experts", [False, True], ids=["resident", "streamed"])
def test_truncated_mid_stream(tmp_path, stream_experts):
    path = tmp_path / "model.gguf"  # greedy, this tiny model runs all 4000 tokens: the cut comes mid-stream
    shutil.copyfile(mm.tiny("qwen3moe", "Q8_0"), path)
    args = ["--model", str(path), "--model-id", "m", "--ctx", "4096", "--kv-slots", "1", "--no-kv-persist",
            "--threads", "2"]
    if stream_experts:
        args += ["--expert-cache-gb", "0.0001"]
    with ServerProcess(args) as srv:
        conn = srv.connection()
        conn.request("POST", "/v1/completions", body=json.dumps(
            {"model": "m", "prompt": "once upon a time", "max_tokens": 4000, "temperature": 0, "stream": True}),
            headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        first = resp.read1(65536)  # the first events
        assert first.startswith(b"data: ")
        os.truncate(path, os.path.getsize(path) // 3)
        # an OpenAI stream that fails after its 200 closes without [DONE] (docs/streaming.md#failures-mid-stream)
        with pytest.raises(http.client.IncompleteRead) as cut:
            resp.read()
        conn.close()
        assert b"[DONE]" not in cut.value.partial
        assert srv.proc.poll() is None, srv.output()  # alive
        # the log line and the closed socket race through two pipes: wait for the line
        assert wait_for(lambda: "generation failed mid-stream: model_file_changed" in srv.output(), 10), srv.output()

        status, _, health = srv.get("/health")
        health = json.loads(health)
        assert status == 200 and health["status"] == "degraded" and health["model_file"] == "changed"

        status, _, body = srv.post("/v1/completions", {"model": "m", "prompt": "again", "max_tokens": 4})
        assert status == 503 and body["error"]["code"] == "model_file_changed", body
        assert str(path) in body["error"]["message"]
        assert srv.proc.poll() is None
