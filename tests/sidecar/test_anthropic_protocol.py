"""The Anthropic Messages request as Claude Code sends it, read without the engine (pure):
the recorded request, system-role messages folded into the system prompt in order, deferred
tools and tool_reference blocks, mid-conversation tool additions and removals,
stop_sequences and top_k, thinking.display, output_config; every refusal named."""
from __future__ import annotations

import json

import pytest

from colibri.api.anthropic_protocol import parse_messages_request, shows_thinking
from colibri.api.errors import ApiError
from colibri.serving.requests import Limits
from tests.sidecar.claude_code import latest_recording

LIMITS = Limits(kv_slots=2)
USER = {"role": "user", "content": "hi"}
F = {"name": "f", "description": "F", "input_schema": {"type": "object"}}
G = {"name": "g", "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}


def parse(**fields):
    return parse_messages_request({"model": "m", "max_tokens": 8, "messages": [USER], **fields}, LIMITS)


def refused(**fields) -> ApiError:
    with pytest.raises(ApiError) as err:
        parse(**fields)
    assert err.value.status == 400
    return err.value


def offered(req) -> list[str]:
    return [t["function"]["name"] for t in req.tools.declared]


def test_the_recorded_claude_code_request_is_read():
    recorded = json.loads(latest_recording().read_text())
    body = recorded["body"]
    assert [m["role"] for m in body["messages"]] == ["user", "system"]  # what the issue saw refused
    req = parse_messages_request(body, LIMITS)
    assert [m.role for m in req.messages] == ["system", "user"]
    top = "\n".join(b["text"] for b in body["system"])
    inline = "\n".join(b["text"] for b in body["messages"][1]["content"])
    assert req.messages[0].content == top + "\n\n" + inline  # the top-level blocks, then the message, in order
    assert req.messages[1].content == "\n".join(b["text"] for b in body["messages"][0]["content"])
    deferred = {t["name"] for t in body["tools"] if t.get("defer_loading")}
    assert offered(req) == [t["name"] for t in body["tools"] if t["name"] not in deferred]
    assert req.tools.choice.mode == "auto" and req.thinking.enable is True
    assert not shows_thinking(body)  # display "omitted"
    o = req.options
    assert (o.max_tokens, o.stream, o.stop, o.top_k) == (body["max_tokens"], True, [], 0)


def test_system_messages_fold_into_the_system_prompt_in_order():
    req = parse(system=[{"type": "text", "text": "A1"}, {"type": "text", "text": "A2", "cache_control": {}}],
                messages=[USER, {"role": "system", "content": "B", "output_config": {"effort": "low"}},
                          {"role": "assistant", "content": "hello"},
                          {"role": "system", "content": [{"type": "text", "text": "C"}, {"type": "text", "text": "D"}]},
                          {"role": "system", "content": []},
                          {"role": "user", "content": "again"}])
    assert [(m.role, m.content) for m in req.messages] == [
        ("system", "A1\nA2\n\nB\n\nC\nD"), ("user", "hi"), ("assistant", "hello"), ("user", "again")]
    assert [(m.role, m.content) for m in parse(messages=[{"role": "system", "content": "S"}, USER]).messages] == [
        ("system", "S"), ("user", "hi")]


def test_deferred_tools_wait_for_a_tool_reference():
    deferred = {**G, "defer_loading": True}
    assert offered(parse(tools=[F, deferred])) == ["f"]
    loaded = parse(tools=[F, deferred], messages=[
        USER, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "tool_reference", "tool_name": "g"},
                                                  {"type": "text", "text": "found g"}]}]}])
    assert offered(loaded) == ["f", "g"] and loaded.messages[-1].content == "found g"


def test_system_messages_add_and_remove_tools():
    changes = {"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": G}},
        {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "f"}},
        {"type": "text", "text": "tools changed"}]}
    req = parse(tools=[F], messages=[USER, changes])
    assert offered(req) == ["g"] and req.messages[0].content == "tools changed"
    assert req.tools.declared[0]["function"]["parameters"] == G["input_schema"]
    assert refused(tools=[F], tool_choice={"type": "tool", "name": "f"}, messages=[USER, changes]).param == \
        "tool_choice"


def test_stop_sequences_and_top_k_are_read():
    o = parse(stop_sequences=["\n\n", "END", "END"], top_k=5).options
    assert o.stop == ["\n\n", "END"] and o.top_k == 5
    assert parse(top_k=0).options.top_k == 0 and parse(stop_sequences=[]).options.stop == []


def test_thinking_display_and_output_config():
    assert shows_thinking({"thinking": {"type": "adaptive", "display": "summarized"}})
    assert not shows_thinking({"thinking": {"type": "adaptive", "display": "omitted"}})
    assert parse(thinking={"type": "adaptive"}).thinking.enable is True
    assert parse(output_config={"effort": "high"}).options.max_tokens == 8  # a hint: accepted


@pytest.mark.parametrize("fields, param", [
    ({"top_k": -1}, "top_k"),
    ({"top_k": "5"}, "top_k"),
    ({"top_k": 2.5}, "top_k"),
    ({"stop_sequences": "END"}, "stop_sequences"),
    ({"stop_sequences": [""]}, "stop_sequences.0"),
    ({"stop_sequences": ["a", 3]}, "stop_sequences.1"),
    ({"thinking": {"type": "adaptive", "display": "verbose"}}, "thinking.display"),
    ({"thinking": {"type": "sometimes"}}, "thinking"),
    ({"output_config": {"format": {"type": "json_schema", "schema": {}}}}, "output_config.format"),
    ({"output_config": "high"}, "output_config"),
    ({"output_format": {"type": "json_schema"}}, "output_format"),
    ({"messages": [{"role": "developer", "content": "x"}, USER]}, "messages.0.role"),
    ({"messages": [{"role": "system", "content": "only a system message"}]}, "messages"),
    ({"messages": [USER, {"role": "system", "content": [{"type": "image", "source": {}}]}]}, "messages.1.content.0"),
    ({"messages": [USER, {"role": "system", "content": 3}]}, "messages.1.content"),
    ({"messages": [USER, {"role": "system", "content": [{"type": "tool_addition", "tool": {"name": "g"}}]}]},
     "messages.1.content.0.tool"),
    ({"messages": [USER, {"role": "system", "content": [
        {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": {"name": "g"}}}]}]},
     "messages.1.content.0.tool.definition.input_schema"),
    ({"messages": [USER, {"role": "system", "content": [
        {"type": "tool_removal", "tool": {"type": "tool_reference"}}]}]}, "messages.1.content.0.tool"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                 "content": [{"type": "tool_reference"}]}]}]},
     "messages.0.content.0.content.0.tool_name"),
])
def test_refusals_are_named(fields, param):
    assert refused(**fields).param == param
