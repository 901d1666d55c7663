"""KV persistence in `coli serve`: a conversation served before a restart is reused after it
(its prefix comes from the slot file, reported as usage.prompt_tokens_details.cached_tokens),
files live under COLI_STATE_DIR, and --no-kv-persist keeps nothing."""
from __future__ import annotations

from tests.sidecar.serve_support import ServerProcess

ARGS = ["--ctx", "256", "--max-tokens", "8"]
TURN1 = [{"role": "user", "content": "Name three colours."}]


def chat(srv, messages):
    status, _, body = srv.post("/v1/chat/completions", {"model": srv.model_id, "messages": messages,
                                                        "temperature": 0})
    assert status == 200, body
    return body


def conversation_across_a_restart(tmp_path, extra: list[str]) -> tuple[dict, dict]:
    env = {"COLI_STATE_DIR": str(tmp_path)}
    with ServerProcess(ARGS + extra, env=env) as srv:
        first = chat(srv, TURN1)
        assert srv.stop() == 0
    turn2 = TURN1 + [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                     {"role": "user", "content": "And three animals?"}]
    with ServerProcess(ARGS + extra, env=env) as srv:
        return first, chat(srv, turn2)


def test_a_conversation_is_reused_after_the_server_restarts(tmp_path):
    first, second = conversation_across_a_restart(tmp_path, [])
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= first["usage"]["prompt_tokens"]  # the whole first turn came from the slot file
    assert cached < second["usage"]["prompt_tokens"]
    assert list(tmp_path.glob("kv/*/slot-0.kv"))  # under the state dir, one folder per model identity


def test_no_kv_persist_starts_cold(tmp_path):
    first, second = conversation_across_a_restart(tmp_path, ["--no-kv-persist"])
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert not list(tmp_path.glob("kv/*/*.kv"))
