"""OpenAI's Codex CLI against a real `coli serve` (the default model, --ctx 32768): the first
request `codex exec` 0.171.0 sends, recorded (recorded/codex-0.171.0-exec-first-request.json:
Codex's ~17k-character base instructions, its skills and environment messages, 8 function
tools, a namespace of 5 more and web_search; `store: false`, `include:
["reasoning.encrypted_content"]`, `prompt_cache_key`, `client_metadata`), replayed and its
stream checked event by event against the vendor's schema; then `codex exec` itself when
Node and the CLI are here (scripts/test.sh installs it into ~/.cache/colibri/npm).

Both share one server with one slot, so the second prefill reuses the first's prefix (Codex's
base instructions): the module prefills ~4,400 tokens once, a minute or two on two cores.
Gemma 3 270M answers Codex's prompt by repeating it, so the 24-token budget ends the turn:
Codex reports that as an incomplete response, which proves it read the whole stream.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.sidecar.responses_support import events, grammar
from tests.sidecar.serve_support import ServerProcess

RECORDED = Path(__file__).parent / "recorded" / "codex-0.171.0-exec-first-request.json"
NPM_PREFIX = Path(os.environ.get("COLI_NPM_CACHE", Path.home() / ".cache" / "colibri" / "npm"))
BUDGET = 24  # --max-tokens: Codex names no max_output_tokens


@pytest.fixture(scope="module")
def server():
    with ServerProcess(["--ctx", "32768", "--max-tokens", str(BUDGET), "--kv-slots", "1", "--no-kv-persist"],
                       env={"COLI_TEMP": "0"}) as srv:
        yield srv


def test_the_recorded_codex_request(server):
    recorded = json.loads(RECORDED.read_text())
    body = {**recorded["body"], "model": server.model_id}
    assert body["stream"] is True and body["store"] is False and len(body["tools"]) == 9
    status, headers, raw = server.request(recorded["method"], recorded["path"], json.dumps(body).encode(),
                                          {**recorded["headers"], "Content-Type": "application/json"}, timeout=900)
    assert status == 200, raw[:2000]
    assert headers["content-type"].startswith("text/event-stream") and "x-colibri-queue-wait-ms" in headers
    evs = events(raw.decode("utf-8"))
    final = grammar(evs)
    assert final["status"] in ("completed", "incomplete") and final["store"] is False
    assert final["tools"] == body["tools"] and final["tool_choice"] == "auto" and final["parallel_tool_calls"]
    assert final["prompt_cache_key"] == body["prompt_cache_key"]
    assert final["reasoning"] == {"effort": None, "summary": "auto"}
    text = final["output"][0]["content"][0]["text"]
    assert final["output"][0]["type"] == "message" and text.strip()
    usage = final["usage"]
    # the four messages (~19.5k characters), without the tools: Gemma's template offers none
    assert 3000 < usage["input_tokens"] < 8000 and usage["output_tokens"] <= BUDGET
    if final["status"] == "incomplete":
        assert usage["output_tokens"] == BUDGET and final["incomplete_details"] == {"reason": "max_output_tokens"}


def codex_command() -> list[str]:
    """The Codex CLI to run, or a skip that says how to get it."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the Codex CLI (npm @openai/codex) needs it")
    for candidate in (os.environ.get("COLI_CODEX"), NPM_PREFIX / "node_modules" / ".bin" / "codex",
                      shutil.which("codex")):
        if candidate and Path(candidate).exists():
            return [str(candidate)]
    pytest.skip(f"the Codex CLI is not installed (not at {NPM_PREFIX}, not on PATH): scripts/test.sh installs it "
                f"with `npm install --prefix {NPM_PREFIX} @openai/codex@0.171.0`")


def test_codex_exec_end_to_end(server, tmp_path):
    codex = codex_command()
    version = subprocess.run(codex + ["--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(f'''model = "{server.model_id}"
model_provider = "colibri"

[model_providers.colibri]
name = "colibri"
base_url = "{server.base}/v1"
wire_api = "responses"
env_key = "COLIBRI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 900000
''')
    env = {**os.environ, "CODEX_HOME": str(home), "COLIBRI_API_KEY": "local"}
    done = subprocess.run(codex + ["exec", "--skip-git-repo-check", "--ephemeral", "--json", "-C", str(work),
                                   "Say hello"], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                          timeout=900)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    kinds = [e["type"] for e in lines]
    context = f"{version}: rc {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "turn.started" in kinds, context
    said = [e["item"]["text"] for e in lines if e["type"] == "item.completed" and
            e["item"].get("type") == "agent_message"]
    assert len(said) == 1 and said[0].strip(), context  # the streamed message, as Codex assembled it
    if "turn.completed" in kinds:  # the model ended its turn within the budget
        assert done.returncode == 0, context
        usage = next(e for e in lines if e["type"] == "turn.completed")["usage"]
        assert usage["input_tokens"] > 3000 and 0 < usage["output_tokens"] <= BUDGET, context
    else:  # the budget ended it: Codex read response.incomplete and its reason
        failed = next(e for e in lines if e["type"] == "turn.failed")
        assert failed["error"]["message"] == "Incomplete response returned, reason: max_output_tokens", context
        assert done.returncode == 1, context
