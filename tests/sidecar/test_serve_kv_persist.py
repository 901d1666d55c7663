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


def test_restored_slots_keep_their_conversations_in_the_slot_choice(tmp_path):
    """Two conversations on two slots; after a restart each continuation goes back to its own
    slot (the scheduler learns what the restored slots hold) and is reused from there."""
    args = ["--ctx", "256", "--max-tokens", "4", "--kv-slots", "2"]
    env = {"COLI_STATE_DIR": str(tmp_path)}
    first = [{"role": "user", "content": "Name three colours."}]
    second = [{"role": "user", "content": "Write a haiku about the sea, please."}]
    with ServerProcess(args, env=env) as srv:
        a, b = chat(srv, first), chat(srv, second)  # slot 0, then the unused slot 1
    turns = [convo + [{"role": "assistant", "content": r["choices"][0]["message"]["content"]},
                      {"role": "user", "content": "Thanks!"}] for convo, r in ((first, a), (second, b))]
    with ServerProcess(args, env=env) as srv:
        again_b = chat(srv, turns[1])  # first after the restart: both slots are free
    assert again_b["usage"]["prompt_tokens_details"]["cached_tokens"] >= b["usage"]["prompt_tokens"]
