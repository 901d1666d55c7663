"""The Anthropic Messages request shape: a JSON body in, the same checked request the chat
route serves (messages, options, thinking, tools), or a named 400.

Translation: `system` (string or text blocks) and the `system`-role messages
Claude Code sends inside `messages` become one system message, in order (the
templates have one place for it); `tool_use` blocks become an assistant turn's
tool calls, `tool_result` blocks tool messages, `thinking` blocks its
reasoning; tool_choice auto/any/tool/none map to auto/required/a named
function/none. Tools marked `defer_loading` are offered once a `tool_reference`
block names them, and a system message's `tool_addition` / `tool_removal`
blocks change the offer, as Anthropic's API does. `stop_sequences` and `top_k`
are honoured. Hosted-platform fields (`metadata`, `service_tier`,
`cache_control`, `context_management`, `output_config.effort`, ...) are
accepted and ignored; what would change the answer and is not built
(non-text blocks, server tools, `output_config.format`) is refused by name.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from colibri.api.errors import ApiError, bad_request
from colibri.api.fields import opt_bool, opt_int, opt_str, out_of_range, sampling, top_k_of, wrong_type
from colibri.chat.messages import Message, Thinking
from colibri.serving.requests import ChatRequest, Limits, Options, ToolChoice, Tools

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
FIELDS = frozenset({"model", "messages", "max_tokens", "system", "stream", "temperature", "top_p", "top_k",
                    "stop_sequences", "tools", "tool_choice", "thinking", "cache_slot"})
# hosted-platform features with no local meaning: accepted, ignored (output_config is checked apart)
IGNORED = frozenset({"metadata", "service_tier", "container", "mcp_servers", "context_management", "cache_control",
                     "output_config", "betas", "inference_geo", "diagnostics", "speed", "user_profile_id",
                     "workspace_id"})
COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking"})
BLOCK_IGNORED = ("cache_control", "citations")  # per-block hosted fields
THINKING_DISPLAY = ("summarized", "omitted")
OUTPUT_CONFIG_IGNORED = ("effort",)  # a hint to a hosted model; the local one has no effort setting


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
    top_k = top_k_of(body, lo=0)  # 0: off
    output_config(body.get("output_config"))
    cache_slot = opt_int(body, "cache_slot")
    if cache_slot is not None and not 0 <= cache_slot < limits.kv_slots:
        raise out_of_range("cache_slot", f"an integer in [0, {limits.kv_slots})", cache_slot)
    options = Options(max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                      stream=bool(opt_bool(body, "stream", False)), stop=stop_sequences(body.get("stop_sequences")),
                      cache_slot=cache_slot, model=opt_str(body, "model"))
    convo = conversation(body.get("messages"))
    system = [text for text in [system_text(body.get("system"))] + convo.system if text]
    messages = ([Message("system", "\n\n".join(system))] if system else []) + convo.messages
    return ChatRequest(messages=messages, options=options, thinking=thinking(body.get("thinking")),
                       tools=tools(body.get("tools"), body.get("tool_choice"), convo))


def stop_sequences(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong_type("stop_sequences", "an array of strings", value)
    for i, s in enumerate(value):
        if not isinstance(s, str):
            raise wrong_type(f"stop_sequences.{i}", "a string", s)
        if s == "":
            raise bad_request("invalid_value", f"stop_sequences.{i}: a stop sequence must not be empty",
                              f"stop_sequences.{i}")
    return list(dict.fromkeys(value))


def output_config(value: object) -> None:
    """effort is a hint (accepted, ignored); anything else (format: structured output) would
    change the answer, and is refused by name."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise wrong_type("output_config", "an object", value)
    for key in value:
        if key not in OUTPUT_CONFIG_IGNORED and value[key] is not None:
            raise bad_request("unsupported_parameter", f"output_config.{key} is not supported by this server",
                              f"output_config.{key}")


def system_text(value: object, where: str = "system") -> str:
    if value is None or value == "" or value == []:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise wrong_type(where, "a string or an array of text blocks", value)
    return "\n".join(text_block(b, f"{where}.{i}") for i, b in enumerate(value))


def text_block(block: object, where: str) -> str:
    if not isinstance(block, dict) or block.get("type") != "text":
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        raise bad_request("unsupported_content_type", f"{where}: content blocks of type {kind!r} are not "
                                                      "supported here: this server takes text", where)
    if not isinstance(block.get("text"), str):
        raise wrong_type(f"{where}.text", "a string", block.get("text"))
    return block["text"]


@dataclass
class Conversation:
    """`messages` read: the turns, the system-role messages' text (in order), the tool
    additions and removals they carry, and the deferred tools tool_reference blocks named."""

    messages: list[Message] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    tool_changes: list[tuple[str, object, str]] = field(default_factory=list)  # (kind, tool or name, where)
    discovered: set[str] = field(default_factory=set)


def conversation(value: object) -> Conversation:
    if not isinstance(value, list):
        raise wrong_type("messages", "an array", value)
    if not value:
        raise bad_request("invalid_value", "messages: at least one message is required", "messages")
    out = Conversation()
    for i, m in enumerate(value):
        where = f"messages.{i}"
        if not isinstance(m, dict):
            raise wrong_type(where, "an object", m)
        role = m.get("role")
        if role not in ("user", "assistant", "system"):
            raise bad_request("invalid_value", f"{where}.role: must be 'user', 'assistant' or 'system', got {role!r}",
                              f"{where}.role")
        content = m.get("content")
        if role == "system":
            system_message(content, where, out)
        elif isinstance(content, str):
            out.messages.append(Message(role, content))
        elif not isinstance(content, list):
            raise wrong_type(f"{where}.content", "a string or an array of content blocks", content)
        elif role == "user":
            out.messages += user_turn(content, where, out.discovered)
        else:
            out.messages.append(assistant_turn(content, where))
    if not out.messages:
        raise bad_request("invalid_value", "messages: at least one user or assistant message is required", "messages")
    return out


def system_message(content: object, where: str, out: Conversation) -> None:
    """A system-role message: its text joins the system prompt; tool_addition / tool_removal
    blocks (the mid-conversation tool changes beta) change the tools offered."""
    if isinstance(content, str) or content is None:
        out.system.append(content or "")
        return
    if not isinstance(content, list):
        raise wrong_type(f"{where}.content", "a string or an array of content blocks", content)
    texts = []
    for j, b in enumerate(content):
        at = f"{where}.content.{j}"
        kind = b.get("type") if isinstance(b, dict) else None
        tool = b.get("tool") if isinstance(b, dict) else None
        if kind == "tool_addition":
            if not isinstance(tool, dict) or tool.get("type") != "tool_definition":
                raise wrong_type(f"{at}.tool", "a tool_definition", tool)
            out.tool_changes.append(("add", tool.get("definition"), f"{at}.tool.definition"))
        elif kind == "tool_removal":
            if not isinstance(tool, dict) or tool.get("type") != "tool_reference" or not isinstance(
                    tool.get("name"), str):
                raise wrong_type(f"{at}.tool", "a tool_reference with a name", tool)
            out.tool_changes.append(("remove", tool["name"], at))
        else:
            texts.append(text_block(b, at))
    out.system.append("\n".join(texts))


def user_turn(blocks: list, where: str, discovered: set[str]) -> list[Message]:
    """Tool results first (they answer the previous turn's calls), then the user's text."""
    results, texts = [], []
    for j, b in enumerate(blocks):
        at = f"{where}.content.{j}"
        if isinstance(b, dict) and b.get("type") == "tool_result":
            if not isinstance(b.get("tool_use_id"), str):
                raise wrong_type(f"{at}.tool_use_id", "a string", b.get("tool_use_id"))
            body = b.get("content", "")
            if isinstance(body, str):
                text = body
            else:
                if not isinstance(body, list):
                    raise wrong_type(f"{at}.content", "a string or an array of content blocks", body)
                parts = []
                for k, x in enumerate(body):
                    if isinstance(x, dict) and x.get("type") == "tool_reference":  # loads a deferred tool
                        if not isinstance(x.get("tool_name"), str):
                            raise wrong_type(f"{at}.content.{k}.tool_name", "a string", x.get("tool_name"))
                        discovered.add(x["tool_name"])
                    else:
                        parts.append(text_block(x, f"{at}.content.{k}"))
                text = "\n".join(parts)
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
        raise bad_request("invalid_value", "thinking: expected {'type': 'enabled', 'budget_tokens': N}, "
                                           "{'type': 'adaptive'} or {'type': 'disabled'}", "thinking")
    display = value.get("display")
    if display is not None and display not in THINKING_DISPLAY:
        raise out_of_range("thinking.display", "'summarized' or 'omitted'", display)
    return Thinking(enable=value["type"] != "disabled")


def shows_thinking(body: dict) -> bool:
    """thinking.display 'omitted': thinking blocks come back empty, with their signature."""
    value = body.get("thinking")
    return not (isinstance(value, dict) and value.get("display") == "omitted")


def tool(t: object, at: str) -> dict:
    """A client tool declaration, as the OpenAI route takes it."""
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
    return {"type": "function", "function": {**fn, "parameters": schema}}


def tools(value: object, choice: object, convo: Conversation | None = None) -> Tools:
    """The tools offered: those declared, less the deferred ones no tool_reference named,
    then the system messages' additions and removals in order."""
    if value is not None and not isinstance(value, list):
        raise wrong_type("tools", "an array", value)
    convo = convo or Conversation()
    offered: dict[str, dict] = {}
    for i, t in enumerate(value or []):
        declared = tool(t, f"tools.{i}")
        name = declared["function"]["name"]
        if t.get("defer_loading") is True and name not in convo.discovered:
            continue  # deferred: not in the prompt until a tool_reference loads it
        offered[name] = declared
    for kind, what, at in convo.tool_changes:
        if kind == "add":
            declared = tool(what, at)
            offered[declared["function"]["name"]] = declared
        else:
            offered.pop(what, None)
    declared = list(offered.values())
    return Tools(declared=declared, choice=tool_choice(choice, list(offered)))


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
