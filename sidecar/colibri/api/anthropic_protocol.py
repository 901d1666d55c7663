"""The Anthropic Messages request shape: a JSON body in, the same checked request the chat
route serves (messages, options, thinking, tools), or a named 400.

Translation: `system` (string or text blocks) becomes a system message;
`tool_use` blocks become an assistant turn's tool calls, `tool_result` blocks
tool messages, `thinking` blocks its reasoning; tool_choice auto/any/tool/none
map to auto/required/a named function/none. Hosted-platform fields
(`metadata`, `service_tier`, `cache_control`, `container`, ...) are accepted
and ignored; `stop_sequences`, `top_k` and non-text blocks are refused by name.
"""
from __future__ import annotations

import json
import re

from colibri.api.errors import ApiError, bad_request
from colibri.api.fields import opt_bool, opt_int, out_of_range, sampling, wrong_type
from colibri.chat.messages import Message, Thinking
from colibri.serving.requests import ChatRequest, Limits, Options, ToolChoice, Tools

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
FIELDS = frozenset({"model", "messages", "max_tokens", "system", "stream", "temperature", "top_p", "top_k",
                    "stop_sequences", "tools", "tool_choice", "thinking", "cache_slot"})
# hosted-platform features with no local meaning: accepted, ignored
IGNORED = frozenset({"metadata", "service_tier", "container", "mcp_servers", "context_management", "cache_control",
                     "output_config", "betas", "inference_geo", "diagnostics", "speed", "user_profile_id",
                     "workspace_id"})
COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking"})
BLOCK_IGNORED = ("cache_control", "citations")  # per-block hosted fields


def parse_messages_request(body: dict, limits: Limits, counting: bool = False) -> ChatRequest:
    allowed = COUNT_FIELDS if counting else FIELDS
    for name in body:
        if name not in allowed and name not in IGNORED:
            raise bad_request("unsupported_parameter", f"{name}: Extra inputs are not permitted", name)
    if counting:
        max_tokens = 1
    else:
        if body.get("max_tokens") is None:
            raise bad_request("missing_required_parameter", "max_tokens: Field required", "max_tokens")
        max_tokens = opt_int(body, "max_tokens", lo=1)
    temperature, top_p = sampling(body, limits.temperature, limits.top_p, max_temperature=1.0)
    if body.get("top_k") is not None:
        raise bad_request("unsupported_parameter", "top_k is not supported by this server", "top_k")
    stops = body.get("stop_sequences")
    if stops is not None and not isinstance(stops, list):
        raise wrong_type("stop_sequences", "an array of strings", stops)
    if stops:
        raise bad_request("unsupported_parameter", "stop_sequences are not supported on /v1/messages",
                          "stop_sequences")
    cache_slot = opt_int(body, "cache_slot")
    if cache_slot is not None and not 0 <= cache_slot < limits.kv_slots:
        raise out_of_range("cache_slot", f"an integer in [0, {limits.kv_slots})", cache_slot)
    options = Options(max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                      stream=bool(opt_bool(body, "stream", False)), cache_slot=cache_slot)
    messages = system_messages(body.get("system")) + turns(body.get("messages"))
    return ChatRequest(messages=messages, options=options, thinking=thinking(body.get("thinking")),
                       tools=tools(body.get("tools"), body.get("tool_choice")))


def system_messages(value: object) -> list[Message]:
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, str):
        return [Message("system", value)]
    if not isinstance(value, list):
        raise wrong_type("system", "a string or an array of text blocks", value)
    return [Message("system", "\n".join(text_block(b, f"system.{i}") for i, b in enumerate(value)))]


def text_block(block: object, where: str) -> str:
    if not isinstance(block, dict) or block.get("type") != "text":
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        raise bad_request("unsupported_content_type", f"{where}: content blocks of type {kind!r} are not "
                                                      "supported here: this server takes text", where)
    if not isinstance(block.get("text"), str):
        raise wrong_type(f"{where}.text", "a string", block.get("text"))
    return block["text"]


def turns(value: object) -> list[Message]:
    if not isinstance(value, list):
        raise wrong_type("messages", "an array", value)
    if not value:
        raise bad_request("invalid_value", "messages: at least one message is required", "messages")
    out: list[Message] = []
    for i, m in enumerate(value):
        where = f"messages.{i}"
        if not isinstance(m, dict):
            raise wrong_type(where, "an object", m)
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise bad_request("invalid_value", f"{where}.role: must be 'user' or 'assistant', got {role!r}",
                              f"{where}.role")
        content = m.get("content")
        if isinstance(content, str):
            out.append(Message(role, content))
            continue
        if not isinstance(content, list):
            raise wrong_type(f"{where}.content", "a string or an array of content blocks", content)
        out += user_turn(content, where) if role == "user" else [assistant_turn(content, where)]
    return out


def user_turn(blocks: list, where: str) -> list[Message]:
    """Tool results first (they answer the previous turn's calls), then the user's text."""
    results, texts = [], []
    for j, b in enumerate(blocks):
        at = f"{where}.content.{j}"
        if isinstance(b, dict) and b.get("type") == "tool_result":
            if not isinstance(b.get("tool_use_id"), str):
                raise wrong_type(f"{at}.tool_use_id", "a string", b.get("tool_use_id"))
            body = b.get("content", "")
            text = body if isinstance(body, str) else "\n".join(
                text_block(x, f"{at}.content.{k}") for k, x in enumerate(body or []))
            if b.get("is_error"):
                text = f"Error: {text}"
            results.append(Message("tool", text, tool_call_id=b["tool_use_id"]))
        else:
            texts.append(text_block(b, at))
    return results + ([Message("user", "\n".join(texts))] if texts else [])


def assistant_turn(blocks: list, where: str) -> Message:
    texts, calls, thoughts = [], [], []
    for j, b in enumerate(blocks):
        at = f"{where}.content.{j}"
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "tool_use":
            if not isinstance(b.get("name"), str) or not isinstance(b.get("id"), str):
                raise wrong_type(at, "a tool_use block with 'id' and 'name'", b)
            if not isinstance(b.get("input", {}), dict):
                raise wrong_type(f"{at}.input", "an object", b.get("input"))
            calls.append({"id": b["id"], "type": "function",
                          "function": {"name": b["name"], "arguments": b.get("input", {})}})
        elif kind == "thinking":
            thoughts.append(str(b.get("thinking", "")))
        elif kind == "redacted_thinking":
            continue  # opaque to a local model
        else:
            texts.append(text_block(b, at))
    return Message("assistant", "".join(texts), reasoning_content="".join(thoughts) if thoughts else None,
                   tool_calls=calls or None)


def thinking(value: object) -> Thinking:
    if value is None:
        return Thinking()
    if not isinstance(value, dict) or value.get("type") not in ("enabled", "disabled", "adaptive"):
        raise bad_request("invalid_value", "thinking: expected {'type': 'enabled', 'budget_tokens': N} or "
                                           "{'type': 'disabled'}", "thinking")
    return Thinking(enable=value["type"] != "disabled")


def tools(value: object, choice: object) -> Tools:
    if value is not None and not isinstance(value, list):
        raise wrong_type("tools", "an array", value)
    declared = []
    for i, t in enumerate(value or []):
        at = f"tools.{i}"
        if not isinstance(t, dict):
            raise wrong_type(at, "an object", t)
        if t.get("type") not in (None, "custom"):
            raise bad_request("unsupported_value", f"{at}: server tools ({t.get('type')}) are not available "
                                                   "locally; declare client tools with an input_schema", at)
        name = t.get("name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise bad_request("invalid_value", f"{at}.name: must match ^[a-zA-Z0-9_-]{{1,128}}$", f"{at}.name")
        schema = t.get("input_schema")
        if not isinstance(schema, dict):
            raise wrong_type(f"{at}.input_schema", "a JSON Schema object", schema)
        fn = {"name": name}  # OpenAI's key order: the same tool renders the same prompt on both routes
        if isinstance(t.get("description"), str):
            fn["description"] = t["description"]
        declared.append({"type": "function", "function": {**fn, "parameters": schema}})
    names = [t["function"]["name"] for t in declared]
    return Tools(declared=declared, choice=tool_choice(choice, names))


def tool_choice(value: object, names: list[str]) -> ToolChoice:
    if value is None:
        return ToolChoice("auto" if names else "none")
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "none" or (kind == "auto" and not names):
        return ToolChoice("none")
    if kind in ("auto", "any") and names:
        return ToolChoice("auto" if kind == "auto" else "required")
    if kind == "tool" and value.get("name") in names:
        return ToolChoice("function", value["name"])
    raise bad_request("invalid_value", "tool_choice: expected auto, any, none, or {'type': 'tool', 'name': N} "
                                       "naming a declared tool", "tool_choice")


def anthropic_error_type(status: int) -> str:
    return {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
            404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 502: "api_error",
            503: "overloaded_error", 529: "overloaded_error"}.get(status, "api_error" if status >= 500
                                                                  else "invalid_request_error")


def error_body(err: ApiError, request_id: str | None) -> dict:
    """Anthropic's envelope; the OpenAI-style code and field travel in the message."""
    detail = f" [{err.code}]" if err.code else ""
    return {"type": "error", "error": {"type": anthropic_error_type(err.status), "message": err.message + detail},
            "request_id": request_id}


def tool_input(arguments: str) -> dict:
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
