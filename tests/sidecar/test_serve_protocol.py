"""`coli serve` request rules: every refusal is a named 400 with the field it concerns (pure)."""
from __future__ import annotations

import pytest

from colibri.api.errors import ApiError
from colibri.api.protocol import Limits, parse_chat, parse_completion

LIMITS = Limits(kv_slots=2, max_tokens=1024, temperature=0.7, top_p=0.9)
MSGS = [{"role": "user", "content": "hi"}]


def chat(**fields):
    return parse_chat({"model": "m", "messages": MSGS, **fields}, LIMITS)


def completion(**fields):
    return parse_completion({"model": "m", "prompt": "Once", **fields}, LIMITS)


@pytest.mark.parametrize("fields, code, param", [
    ({"temperature": 2.5}, "invalid_value", "temperature"),
    ({"temperature": "hot"}, "invalid_value", "temperature"),
    ({"top_p": 0}, "invalid_value", "top_p"),
    ({"top_p": 1.5}, "invalid_value", "top_p"),
    ({"max_tokens": 0}, "invalid_value", "max_tokens"),
    ({"max_tokens": 1.5}, "invalid_value", "max_tokens"),
    ({"max_tokens": True}, "invalid_value", "max_tokens"),
    ({"max_completion_tokens": "9"}, "invalid_value", "max_completion_tokens"),
    ({"stream": "yes"}, "invalid_value", "stream"),
    ({"stream_options": {"include_usage": 1}}, "invalid_value", "stream_options.include_usage"),
    ({"stream_options": {"chunk_size": 3}}, "unsupported_parameter", "stream_options.chunk_size"),
    ({"n": 2}, "unsupported_value", "n"),
    ({"best_of": 3}, "unsupported_value", "best_of"),
    ({"presence_penalty": 0.5}, "unsupported_value", "presence_penalty"),
    ({"frequency_penalty": -1}, "unsupported_value", "frequency_penalty"),
    ({"logit_bias": {"42": 3}}, "unsupported_value", "logit_bias"),
    ({"modalities": ["text", "audio"]}, "unsupported_value", "modalities"),
    ({"modalities": "text"}, "invalid_value", "modalities"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "invalid_value", "stop"),
    ({"stop": [""]}, "invalid_value", "stop.0"),
    ({"stop": [3]}, "invalid_value", "stop.0"),
    ({"cache_slot": 2}, "invalid_value", "cache_slot"),
    ({"cache_slot": -1}, "invalid_value", "cache_slot"),
    ({"cache_slot": "0"}, "invalid_value", "cache_slot"),
    ({"x_colibri_ignore_leading_stop": "yes"}, "invalid_value", "x_colibri_ignore_leading_stop"),
    ({"ignore_eos": 1}, "invalid_value", "ignore_eos"),
    ({"top_k": "40"}, "invalid_value", "top_k"),
    ({"top_k": 1.5}, "invalid_value", "top_k"),
    ({"logprobs": 1}, "invalid_value", "logprobs"),
    ({"logprobs": True, "stream": True}, "unsupported_parameter", "logprobs"),
    ({"top_logprobs": 33}, "invalid_value", "top_logprobs"),
    ({"top_logprobs": "3", "logprobs": False}, "invalid_value", "top_logprobs"),
    ({"echo": True}, "unsupported_parameter", "echo"),
    ({"echo": "no"}, "invalid_value", "echo"),
    ({"tools": [{"type": "code_interpreter"}]}, "unsupported_value", "tools.0.type"),
    ({"tools": [{"type": "function", "function": {"name": "two words"}}]}, "invalid_value", "tools.0.function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]}, "invalid_value",
     "tools.0.function.parameters"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]}, "invalid_value", "tools"),
    ({"tools": "f"}, "invalid_value", "tools"),
    ({"tool_choice": "required"}, "invalid_value", "tool_choice"),
    ({"tool_choice": "sometimes", "tools": [{"type": "function", "function": {"name": "f"}}]}, "invalid_value", "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}, "invalid_value",
     "tool_choice.function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "strict_tool_calls": True, "stream": True}, "unsupported_parameter", "strict_tool_calls"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "strict_tool_calls": True, "logprobs": True}, "unsupported_parameter", "strict_tool_calls"),
    ({"strict_tool_calls": "yes"}, "invalid_value", "strict_tool_calls"),
    ({"functions": [{"name": "f"}]}, "unsupported_parameter", "functions"),
    ({"response_format": {"type": "json_object"}}, "unsupported_value", "response_format.type"),
    ({"reasoning_effort": "max"}, "invalid_value", "reasoning_effort"),
    ({"enable_thinking": "on"}, "invalid_value", "enable_thinking"),
    ({"messages": []}, "invalid_value", "messages"),
    ({"messages": "hi"}, "invalid_value", "messages"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "missing_required_parameter", "messages.0.tool_call_id"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "unsupported_role", "messages.0.role"),
    ({"messages": [{"role": "user"}]}, "missing_required_parameter", "messages.0.content"),
    ({"messages": [{"role": "user", "content": 3}]}, "invalid_value", "messages.0.content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "unsupported_content_type", "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
     "unsupported_content_type", "messages.0.content.0"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": None,
                                                      "tool_calls": [{"id": "c"}]}]},
     "invalid_value", "messages.1.tool_calls.0"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}]},
     "invalid_value", "messages.1.tool_calls.0.function.arguments"),
])
def test_chat_refusals_are_named(fields, code, param):
    with pytest.raises(ApiError) as err:
        chat(**fields)
    assert err.value.status == 400
    assert (err.value.code, err.value.param) == (code, param)
    assert err.value.type == "invalid_request_error" and err.value.message


@pytest.mark.parametrize("fields, code, param", [
    ({"prompt": ""}, "invalid_value", "prompt"),
    ({"prompt": ["a", "b"]}, "unsupported_value", "prompt"),
    ({"prompt": [1, 2, 3]}, "unsupported_value", "prompt"),
    ({"suffix": "end"}, "unsupported_parameter", "suffix"),
    ({"logprobs": True}, "invalid_value", "logprobs"),
    ({"logprobs": 33}, "invalid_value", "logprobs"),
    ({"logprobs": 2, "stream": True}, "unsupported_parameter", "logprobs"),
    ({"logprobs": -1}, "invalid_value", "logprobs"),
    ({"logprobs": 0, "echo": True}, "invalid_value", "echo"),
    ({"echo": True}, "invalid_value", "echo"),
    ({"echo": 1}, "invalid_value", "echo"),
    ({"messages": MSGS}, "unsupported_parameter", "messages"),
    ({"best_of": 2}, "unsupported_value", "best_of"),
])
def test_completion_refusals_are_named(fields, code, param):
    with pytest.raises(ApiError) as err:
        completion(**fields)
    assert (err.value.status, err.value.code, err.value.param) == (400, code, param)


def test_missing_prompt():
    with pytest.raises(ApiError) as err:
        parse_completion({"model": "m"}, LIMITS)
    assert (err.value.code, err.value.param) == ("missing_required_parameter", "prompt")


def test_defaults_and_budget_precedence():
    req = chat()
    o = req.options
    assert (o.max_tokens, o.temperature, o.top_p, o.stream, o.stop, o.cache_slot) == (1024, 0.7, 0.9, False, [], None)
    assert chat(max_tokens=5).options.max_tokens == 5
    assert chat(max_tokens=5, max_completion_tokens=7).options.max_tokens == 7  # the newer field wins
    assert chat(max_tokens=10 ** 9).options.max_tokens == 10 ** 9  # a ceiling: clamped later, never refused


def test_accepted_and_ignored_fields():
    ignored = {"store": True, "metadata": {"a": "b"}, "service_tier": "auto", "user": "u", "safety_identifier": "s",
               "parallel_tool_calls": True, "prompt_cache_key": "k", "verbosity": "low",
               "web_search_options": {}, "moderation": None, "stream_options": {"include_obfuscation": True},
               "seed": "not validated", "tool_choice": "none", "logprobs": False, "top_logprobs": 3, "echo": None,
               "n": 1, "best_of": 1, "logit_bias": {}, "presence_penalty": 0, "modalities": ["text"],
               "response_format": {"type": "text"}, "stop": None}
    assert chat(**ignored).options.seed is None
    assert chat(seed=7).options.seed == 7
    assert completion(logprobs=0, echo=False).prompt == "Once"
    assert completion(logprobs=False).prompt == "Once"
    assert completion(logprobs=None, echo=None).prompt == "Once"


def test_messages_read_as_text():
    req = chat(messages=[{"role": "developer", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                          "name": "ann"},
                         {"role": "assistant", "content": None, "reasoning_content": "hmm"}])
    assert [(m.role, m.content) for m in req.messages] == [("system", "be brief"), ("user", "a\nb"), ("assistant", "")]
    assert req.messages[2].reasoning_content == "hmm"


def test_log_probability_gates():
    assert (chat(logprobs=True).options.logprobs, chat(logprobs=True).options.top_logprobs) == (True, 0)
    assert chat(logprobs=True, top_logprobs=5).options.top_logprobs == 5
    assert chat(logprobs=False, top_logprobs=5).options.top_logprobs == 0  # a documented no-op
    assert chat(logprobs=None).options.logprobs is False
    o = completion(logprobs=3, echo=True).options
    assert (o.logprobs, o.top_logprobs, o.echo) == (True, 3, True)
    for off in (0, False, None):
        assert completion(logprobs=off).options.logprobs is False


def test_tools_and_tool_turns_are_read():
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    req = chat(tools=[tool], messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny"}]}])
    assert req.tools.active and req.tools.choice.mode == "auto" and req.tools.schemas == {"get_weather": {"type": "object"}}
    assert req.messages[1].tool_calls[0]["function"]["arguments"] == {"city": "Oslo"}  # templates iterate objects
    assert (req.messages[2].role, req.messages[2].tool_call_id, req.messages[2].content) == ("tool", "call_1", "sunny")
    assert not chat(tools=[tool], tool_choice="none").tools.active
    named = chat(tools=[tool], tool_choice={"type": "function", "function": {"name": "get_weather"}}).tools.choice
    assert (named.mode, named.name) == ("function", "get_weather")


def test_stop_forms():
    assert chat(stop="END").options.stop == ["END"]
    assert chat(stop=["a", "b", "a"]).options.stop == ["a", "b"]
    assert chat(stop=[]).options.stop == []
