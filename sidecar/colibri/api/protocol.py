"""The OpenAI request shapes: a JSON body in, a checked request object out, or a named 400.

Every field is either honoured, accepted-and-ignored (hosted-platform
bookkeeping, docs/openai-api.md#ignored-fields), or refused by name; an unknown field is refused too, so a client never
believes a setting took effect when it did not.
"""
from __future__ import annotations

import json
import re

from colibri.api.errors import ApiError, bad_request
from colibri.api.fields import (opt_bool, opt_int, opt_number, opt_object, opt_str, out_of_range, sampling, top_k_of,
                                type_name, wrong_type)
from colibri.chat.messages import Message, Thinking
from colibri.serving.requests import ChatRequest, CompletionRequest, Limits, Options, ToolChoice, Tools

MAX_STOPS = 4
MAX_TOP_LOGPROBS = 32
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# hosted-platform bookkeeping: no local meaning, no effect on generation (docs/openai-api.md#ignored-fields)
IGNORED = frozenset({"store", "metadata", "service_tier", "user", "safety_identifier", "parallel_tool_calls",
                     "prompt_cache_key", "verbosity", "web_search_options", "moderation"})
COMMON = frozenset({"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature",
                    "top_p", "top_k", "n", "stop", "seed", "presence_penalty", "frequency_penalty",
                    "repetition_penalty", "logit_bias", "logprobs", "best_of", "modalities", "echo", "cache_slot",
                    "ignore_eos", "x_colibri_ignore_leading_stop"})
CHAT_ONLY = frozenset({"messages", "top_logprobs", "tools", "tool_choice", "functions", "function_call",
                       "response_format", "enable_thinking", "reasoning_effort", "preserve_thinking",
                       "strict_tool_calls"})
COMPLETION_ONLY = frozenset({"prompt", "suffix"})
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
CHAT_TEXT_PARTS = {"text": "text"}
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def check_fields(body: dict, allowed: frozenset) -> None:
    for name in body:
        if name not in allowed and name not in IGNORED:
            raise ApiError(400, "unsupported_parameter", f"'{name}' is not a parameter this server supports", param=name)


def parse_model(body: dict) -> str | None:
    return opt_str(body, "model")


def parse_options(body: dict, limits: Limits) -> Options:
    stream = opt_bool(body, "stream", False)
    include_usage = False
    stream_options = opt_object(body, "stream_options")
    if stream_options is not None:
        for key in stream_options:
            if key not in ("include_usage", "include_obfuscation"):
                raise ApiError(400, "unsupported_parameter", f"'stream_options.{key}' is not supported",
                               param=f"stream_options.{key}")
        for key in ("include_usage", "include_obfuscation"):  # include_obfuscation: accepted, ignored
            value = stream_options.get(key)
            if value is not None and not isinstance(value, bool):
                raise wrong_type(f"stream_options.{key}", "a boolean", value)
        include_usage = bool(stream_options.get("include_usage"))
    # max_completion_tokens wins over max_tokens; either is a ceiling, clamped later to the context
    budget = opt_int(body, "max_completion_tokens", lo=1)
    legacy = opt_int(body, "max_tokens", lo=1)
    max_tokens = budget if budget is not None else legacy if legacy is not None else limits.max_tokens
    temperature, top_p = sampling(body, limits.temperature, limits.top_p, max_temperature=2.0)
    top_k = top_k_of(body)  # llama.cpp's server's extension; <= 0: off, as there
    ignore_eos = bool(opt_bool(body, "ignore_eos", False))  # llama.cpp's server's too: past the end token
    seed = body.get("seed")  # accepted unvalidated; an integer one is honoured (docs/openai-api.md#seed)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    n = opt_int(body, "n", lo=1)
    if n not in (None, 1):
        raise ApiError(400, "unsupported_value", f"'n' must be 1: one choice per request, got {n}", param="n")
    best_of = opt_int(body, "best_of", lo=1)
    if best_of not in (None, 1):
        raise ApiError(400, "unsupported_value", f"'best_of' above 1 is not supported, got {best_of}", param="best_of")
    for name in ("presence_penalty", "frequency_penalty"):
        value = opt_number(body, name, 0.0)
        if value != 0.0:
            raise ApiError(400, "unsupported_value", f"'{name}' is not supported (token penalties), got {value}",
                           param=name)
    repetition = opt_number(body, "repetition_penalty", 1.0)
    if repetition != 1.0:
        raise ApiError(400, "unsupported_value", f"'repetition_penalty' is not supported, got {repetition}",
                       param="repetition_penalty")
    bias = opt_object(body, "logit_bias")
    if bias:
        raise ApiError(400, "unsupported_value", "a non-empty 'logit_bias' is not supported", param="logit_bias")
    parse_modalities(body)
    cache_slot = opt_int(body, "cache_slot")
    if cache_slot is not None and not 0 <= cache_slot < limits.kv_slots:
        raise out_of_range("cache_slot", f"an integer in [0, {limits.kv_slots}) (--kv-slots {limits.kv_slots})",
                           cache_slot)
    return Options(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, stream=stream,
                   include_usage=include_usage, stop=parse_stop(body),
                   ignore_leading_stop=bool(opt_bool(body, "x_colibri_ignore_leading_stop", False)),
                   cache_slot=cache_slot, model=parse_model(body), ignore_eos=ignore_eos)


def parse_stop(body: dict) -> list[str]:
    value = body.get("stop")
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list):
        raise wrong_type("stop", "a string or an array of strings", value)
    if len(stops) > MAX_STOPS:
        raise out_of_range("stop", f"at most {MAX_STOPS} sequences", f"{len(stops)} sequences")
    for i, s in enumerate(stops):
        if not isinstance(s, str):
            raise wrong_type(f"stop.{i}", "a string", s)
        if s == "":
            raise bad_request("invalid_value", "a stop sequence must not be empty", f"stop.{i}")
    return list(dict.fromkeys(stops))


def parse_modalities(body: dict) -> None:
    value = body.get("modalities")
    if value is None:
        return
    if not isinstance(value, list) or not value or not all(isinstance(m, str) for m in value):
        raise wrong_type("modalities", "a non-empty array of strings", value)
    other = [m for m in value if m != "text"]
    if other:
        raise ApiError(400, "unsupported_value", f"only text output is supported, not {', '.join(other)}",
                       param="modalities")


# ---- chat ---------------------------------------------------------------------

def parse_chat(body: dict, limits: Limits) -> ChatRequest:
    check_fields(body, COMMON | CHAT_ONLY)
    options = parse_options(body, limits)
    parse_chat_logprobs(body, options, limits.stream_logprobs)
    tools = parse_tools(body, options)
    fmt = opt_object(body, "response_format")
    if fmt is not None and fmt.get("type") != "text":
        raise ApiError(400, "unsupported_value",
                       f"response_format {fmt.get('type')!r} is not supported: output is not constrained",
                       param="response_format.type")
    effort = opt_str(body, "reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise out_of_range("reasoning_effort", "one of " + ", ".join(REASONING_EFFORTS), effort)
    thinking = Thinking(enable=opt_bool(body, "enable_thinking"), effort=effort,
                        preserve=opt_bool(body, "preserve_thinking"))
    return ChatRequest(messages=parse_messages(body.get("messages")), options=options, thinking=thinking, tools=tools)


def parse_chat_logprobs(body: dict, options: Options, streamed: bool = False) -> None:
    """logprobs is a boolean gate on chat; top_logprobs (0..32) is checked even while it is closed.
    `streamed`: per-chunk log-probs are passed on (an upstream engine's, `coli serve --upstream`)."""
    value = body.get("logprobs")
    if value is not None and not isinstance(value, bool):
        raise wrong_type("logprobs", "a boolean on chat completions", value)
    top = opt_int(body, "top_logprobs", lo=0, hi=MAX_TOP_LOGPROBS, default=0)
    echo = body.get("echo")
    if echo is not None and not isinstance(echo, bool):
        raise wrong_type("echo", "a boolean", echo)
    if echo:
        raise ApiError(400, "unsupported_parameter", "chat completions have no 'echo'; use /v1/completions",
                       param="echo")
    if value and options.stream and not streamed:
        raise ApiError(400, "unsupported_parameter", "'logprobs' cannot be combined with 'stream': per-delta "
                                                     "log probabilities are not built", param="logprobs")
    options.logprobs = bool(value)
    options.top_logprobs = top if value else 0  # a valid top_logprobs with logprobs off is a no-op


def parse_tools(body: dict, options: Options) -> Tools:
    for name in ("functions", "function_call"):
        if body.get(name) is not None:
            raise ApiError(400, "unsupported_parameter", f"'{name}' is the retired form of tools; send 'tools'",
                           param=name)
    value = body.get("tools")
    if value is not None and not isinstance(value, list):
        raise wrong_type("tools", "an array", value)
    declared = [parse_tool(t, f"tools.{i}") for i, t in enumerate(value or [])]
    names = [t["function"]["name"] for t in declared]
    if len(set(names)) != len(names):
        raise bad_request("invalid_value", "two tools share a name", "tools")
    choice = parse_tool_choice(body.get("tool_choice"), names)
    strict = bool(opt_bool(body, "strict_tool_calls", False))
    if strict and options.stream:
        raise ApiError(400, "unsupported_parameter", "'strict_tool_calls' requires 'stream': false",
                       param="strict_tool_calls")
    if strict and options.logprobs:
        raise ApiError(400, "unsupported_parameter", "'strict_tool_calls' cannot be combined with 'logprobs'",
                       param="strict_tool_calls")
    return Tools(declared=declared, choice=choice, strict=strict)


def parse_tool(tool: object, where: str) -> dict:
    if not isinstance(tool, dict):
        raise wrong_type(where, "an object", tool)
    if tool.get("type") != "function":
        raise ApiError(400, "unsupported_value", f"only tools of type 'function' are supported, got "
                                                 f"{tool.get('type')!r}", param=f"{where}.type")
    fn = tool.get("function")
    if not isinstance(fn, dict):
        raise wrong_type(f"{where}.function", "an object", fn)
    name = fn.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise bad_request("invalid_value", "a function name must be 1-64 letters, digits, '_', '-', '.' or ':'",
                          f"{where}.function.name")
    if fn.get("description") is not None and not isinstance(fn["description"], str):
        raise wrong_type(f"{where}.function.description", "a string", fn["description"])
    if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
        raise wrong_type(f"{where}.function.parameters", "a JSON Schema object", fn["parameters"])
    return {"type": "function", "function": {k: v for k, v in fn.items() if v is not None}}


def parse_tool_choice(value: object, names: list[str]) -> ToolChoice:
    if value is None:
        return ToolChoice("auto" if names else "none")
    if value in ("none", "auto", "required"):
        if value == "required" and not names:
            raise bad_request("invalid_value", "tool_choice 'required' needs at least one tool", "tool_choice")
        return ToolChoice(value if names else "none")
    if isinstance(value, dict) and value.get("type") == "function" and isinstance(value.get("function"), dict):
        name = value["function"].get("name")
        if name not in names:
            raise bad_request("invalid_value", f"tool_choice names {name!r}, which is not among the declared tools",
                              "tool_choice.function.name")
        return ToolChoice("function", name)
    raise bad_request("invalid_value", "tool_choice must be 'none', 'auto', 'required' or "
                                       "{'type': 'function', 'function': {'name': ...}}", "tool_choice")


def parse_messages(value: object) -> list[Message]:
    if value is None:
        raise ApiError(400, "missing_required_parameter", "'messages' is required", param="messages")
    if not isinstance(value, list):
        raise wrong_type("messages", "an array", value)
    if not value:
        raise bad_request("invalid_value", "'messages' must hold at least one message", "messages")
    return [parse_message(m, i) for i, m in enumerate(value)]


def parse_message(m: object, i: int) -> Message:
    where = f"messages.{i}"
    if not isinstance(m, dict):
        raise wrong_type(where, "an object", m)
    role = m.get("role")
    if not isinstance(role, str):
        raise wrong_type(f"{where}.role", "a string", role)
    if role not in CHAT_ROLES:
        raise ApiError(400, "unsupported_role", f"role {role!r} is not supported", param=f"{where}.role")
    if m.get("function_call"):
        raise ApiError(400, "unsupported_parameter", "'function_call' is the retired form of tool_calls",
                       param=f"{where}.function_call")
    tool_calls = parse_tool_calls(m.get("tool_calls"), f"{where}.tool_calls") if role == "assistant" else None
    content = m.get("content")
    if content is None and role != "assistant":
        raise ApiError(400, "missing_required_parameter", f"{role} messages need 'content'", param=f"{where}.content")
    reasoning = m.get("reasoning_content")
    if reasoning is not None and not isinstance(reasoning, str):
        raise wrong_type(f"{where}.reasoning_content", "a string", reasoning)
    name = m.get("name")
    if name is not None and not isinstance(name, str):
        raise wrong_type(f"{where}.name", "a string", name)
    call_id = m.get("tool_call_id")
    if role == "tool" and not isinstance(call_id, str):
        raise ApiError(400, "missing_required_parameter", "tool messages need the 'tool_call_id' they answer",
                       param=f"{where}.tool_call_id")
    return Message(role="system" if role == "developer" else role, content=content_text(content, f"{where}.content"),
                   reasoning_content=reasoning, tool_calls=tool_calls, tool_call_id=call_id if role == "tool" else None,
                   name=name)


def parse_tool_calls(value: object, where: str) -> list[dict] | None:
    """An assistant turn's tool calls, with arguments decoded to objects where they are JSON
    (the form chat templates iterate over)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise wrong_type(where, "an array", value)
    calls = []
    for j, call in enumerate(value):
        at = f"{where}.{j}"
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise wrong_type(at, "an object with a 'function'", call)
        fn = call["function"]
        if not isinstance(fn.get("name"), str):
            raise wrong_type(f"{at}.function.name", "a string", fn.get("name"))
        args = fn.get("arguments", "{}")
        if not isinstance(args, str):
            raise wrong_type(f"{at}.function.arguments", "a JSON string", args)
        try:
            decoded = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            decoded = args
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise wrong_type(f"{at}.id", "a string", call_id)
        calls.append({"id": call_id or f"call_{j}", "type": "function",
                      "function": {"name": fn["name"], "arguments": decoded}})
    return calls or None


def content_text(content: object, where: str, text_of: dict[str, str] | None = None) -> str:
    """A message's text: a string, or the text parts of a content array joined by newlines.
    text_of: the part types taken and the key holding each one's text (chat's: {"text": "text"})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise wrong_type(where, "a string or an array of content parts", content)
    text_of = text_of or CHAT_TEXT_PARTS
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            raise wrong_type(f"{where}.{j}", "an object", part)
        kind = part.get("type")
        if kind not in text_of:
            raise ApiError(400, "unsupported_content_type",
                           f"content parts of type {kind!r} are not supported: this server takes text only",
                           param=f"{where}.{j}")
        key = text_of[kind]
        text = part.get(key)
        if not isinstance(text, str):
            raise wrong_type(f"{where}.{j}.{key}", "a string", text)
        texts.append(text)
    return "\n".join(texts)


# ---- legacy completions ---------------------------------------------------------

def parse_completion(body: dict, limits: Limits) -> CompletionRequest:
    check_fields(body, COMMON | COMPLETION_ONLY)
    options = parse_options(body, limits)
    prompt = body.get("prompt")
    if prompt is None:
        raise ApiError(400, "missing_required_parameter", "'prompt' is required", param="prompt")
    if not isinstance(prompt, str):
        raise ApiError(400, "unsupported_value",
                       f"'prompt' must be a string (got {type_name(prompt)}: arrays and token ids are not supported)",
                       param="prompt")
    if prompt == "":
        raise bad_request("invalid_value", "'prompt' must not be empty", "prompt")
    suffix = body.get("suffix")
    if suffix is not None and not isinstance(suffix, str):
        raise wrong_type("suffix", "a string", suffix)
    if suffix:
        raise ApiError(400, "unsupported_parameter", "'suffix' (infill) is not supported", param="suffix")
    parse_completion_logprobs(body, options, limits.stream_logprobs)
    return CompletionRequest(prompt=prompt, options=options)


def parse_completion_logprobs(body: dict, options: Options, streamed: bool = False) -> None:
    """The legacy integer logprobs (0..32; 0, false and null mean none) and boolean echo."""
    value = body.get("logprobs")
    if value is True:
        raise wrong_type("logprobs", "an integer count from 0 to 32 on completions", value)
    count = 0 if value is False else opt_int(body, "logprobs", lo=0, hi=MAX_TOP_LOGPROBS, default=0)
    echo = body.get("echo")
    if echo is not None and not isinstance(echo, bool):
        raise wrong_type("echo", "a boolean", echo)
    if count and options.stream and not streamed:
        raise ApiError(400, "unsupported_parameter", "'logprobs' cannot be combined with 'stream'", param="logprobs")
    if echo and not count:
        raise bad_request("invalid_value", "'echo' requires 'logprobs': the echo is built from the per-token "
                                           "records", "echo")
    options.logprobs = bool(count)
    options.top_logprobs = count or 0
    options.echo = bool(echo) and bool(count)
