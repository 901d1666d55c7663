"""The OpenAI Responses request shape (POST /v1/responses): a JSON body in, the same checked
ChatRequest the chat route serves plus what the reply object echoes back, or a named 400
(docs/responses-api.md).

Translation into the conversation the chat template renders:

- `instructions`, then the system and developer messages that open `input`, become the
  one system message (joined by blank lines); a system or developer message later in
  `input` is read as user text in its place (a template has one place for a system
  prompt, and a later one must not change the prefix an agent's earlier turns cached);
- consecutive user messages are joined into one turn (templates that insist on
  alternating roles refuse two in a row; an agent sends its context and its prompt as two);
- an assistant turn is the run of `reasoning`, assistant `message` and `function_call`
  items between user and tool items: its text, its reasoning (as the template allows)
  and its tool calls; each `function_call_output` is a tool message;
- function tools (flat: `{"type": "function", "name", "description", "parameters",
  "strict"}`) become chat tools; a `namespace` tool's functions are offered as
  `namespace.name` and come back as calls with their `namespace`; hosted web search is
  dropped from the offer (this server cannot search); every other hosted tool is refused.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field

from colibri.api.errors import ApiError, bad_request
from colibri.api.fields import opt_bool, opt_int, opt_object, opt_str, out_of_range, sampling, wrong_type
from colibri.api.protocol import TOOL_NAME, content_text
from colibri.chat.messages import Message, Thinking
from colibri.serving.requests import ChatRequest, Limits, Options, ToolChoice, Tools

FIELDS = frozenset({"model", "input", "instructions", "previous_response_id", "stream", "stream_options",
                    "max_output_tokens", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls",
                    "reasoning", "text", "include", "store", "truncation", "background", "conversation", "prompt",
                    "context_management", "top_logprobs", "max_tool_calls", "metadata", "cache_slot"})
# hosted-platform bookkeeping with no local meaning: accepted, ignored (docs/responses-api.md#request-fields)
IGNORED = frozenset({"user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
                     "prompt_cache_options", "service_tier", "moderation", "client_metadata"})
REFUSED_FEATURES = {"background": "background responses", "conversation": "stored conversations",
                    "prompt": "stored prompt templates", "context_management": "server-side context management"}
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
SUMMARIES = ("auto", "concise", "detailed")
ROLES = ("user", "assistant", "system", "developer")
WEB_SEARCH = frozenset({"web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"})
INCLUDES = frozenset({"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
                      "message.input_image.image_url", "computer_call_output.output.image_url",
                      "code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs"})
ENCRYPTED_PREFIX = "colibri:"  # a reasoning item's `encrypted_content`: its text, base64, not encrypted


@dataclass
class ResponsesRequest:
    chat: ChatRequest
    items: list[dict]  # the conversation as items: the previous response's, then this input
    echo: dict  # the request's settings as the reply object states them
    store: bool = True
    parallel_tool_calls: bool = True
    encrypted_reasoning: bool = False  # include: reasoning.encrypted_content
    namespaces: dict[str, tuple[str, str]] = field(default_factory=dict)  # offered name -> (namespace, name)


def parse_responses(body: dict, limits: Limits, previous: list[dict] | None = None) -> ResponsesRequest:
    """previous: the items of the response `previous_response_id` names (its input and output)."""
    for name in body:
        if name not in FIELDS and name not in IGNORED:
            raise ApiError(400, "unsupported_parameter", f"'{name}' is not a parameter this server supports",
                           param=name)
    for name, what in REFUSED_FEATURES.items():
        value = body.get(name)
        if value is not None and value is not False:
            raise ApiError(400, "unsupported_parameter", f"'{name}': {what} are not supported by this server",
                           param=name)
    options = parse_options(body, limits)
    include = parse_include(body.get("include"))
    parse_text(body.get("text"))
    truncation = opt_str(body, "truncation", "disabled")
    if truncation not in ("disabled", "auto"):
        raise out_of_range("truncation", "'disabled' or 'auto'", truncation)
    if truncation == "auto":
        raise ApiError(400, "unsupported_value", "truncation 'auto' is not supported: an input over the context is "
                                                 "refused, never cut", param="truncation")
    top_logprobs = opt_int(body, "top_logprobs", lo=0, hi=20, default=0)
    if top_logprobs:
        raise ApiError(400, "unsupported_value", "'top_logprobs' is not supported on /v1/responses",
                       param="top_logprobs")
    opt_int(body, "max_tool_calls", lo=1)  # counts built-in tool calls, and there are none here
    metadata = parse_metadata(body.get("metadata"))
    instructions = opt_str(body, "instructions")
    reasoning = parse_reasoning(body.get("reasoning"))
    store = bool(opt_bool(body, "store", True))
    parallel = bool(opt_bool(body, "parallel_tool_calls", True))
    tools, namespaces = parse_tools(body.get("tools"), body.get("tool_choice"))
    new_items = parse_input(body.get("input"))
    items = (previous or []) + new_items
    messages = conversation(items, len(previous or []), instructions, namespaces)
    if not messages:
        raise bad_request("invalid_value", "'input' holds nothing to answer", "input")
    chat = ChatRequest(messages=messages, options=options, thinking=Thinking(effort=reasoning["effort"]),
                       tools=tools)
    echo = {"instructions": instructions, "max_output_tokens": body.get("max_output_tokens"),
            "metadata": metadata, "parallel_tool_calls": parallel,
            "previous_response_id": body.get("previous_response_id"), "reasoning": reasoning,
            "store": store, "temperature": options.temperature, "top_p": options.top_p,
            "text": {"format": {"type": "text"}, "verbosity": (body.get("text") or {}).get("verbosity") or "medium"},
            "tool_choice": body.get("tool_choice") if body.get("tool_choice") is not None else
            ("auto" if tools.declared else "none"),
            "tools": list(body.get("tools") or []), "truncation": "disabled", "top_logprobs": 0,
            "user": body.get("user") if isinstance(body.get("user"), str) else None,
            "prompt_cache_key": body.get("prompt_cache_key") if isinstance(body.get("prompt_cache_key"), str)
            else None, "background": False}
    return ResponsesRequest(chat=chat, items=items, echo=echo, store=store, parallel_tool_calls=parallel,
                            encrypted_reasoning="reasoning.encrypted_content" in include, namespaces=namespaces)


# ---- settings -----------------------------------------------------------------------

def parse_options(body: dict, limits: Limits) -> Options:
    stream = bool(opt_bool(body, "stream", False))
    stream_options = opt_object(body, "stream_options")
    for key, value in (stream_options or {}).items():
        if key != "include_obfuscation":
            raise ApiError(400, "unsupported_parameter", f"'stream_options.{key}' is not supported",
                           param=f"stream_options.{key}")
        if value is not None and not isinstance(value, bool):  # accepted, ignored: no obfuscation padding
            raise wrong_type("stream_options.include_obfuscation", "a boolean", value)
    max_tokens = opt_int(body, "max_output_tokens", lo=1, default=limits.max_tokens)
    temperature, top_p = sampling(body, limits.temperature, limits.top_p, max_temperature=2.0)
    cache_slot = opt_int(body, "cache_slot")
    if cache_slot is not None and not 0 <= cache_slot < limits.kv_slots:
        raise out_of_range("cache_slot", f"an integer in [0, {limits.kv_slots}) (--kv-slots {limits.kv_slots})",
                           cache_slot)
    return Options(max_tokens=max_tokens, temperature=temperature, top_p=top_p, stream=stream,
                   cache_slot=cache_slot, model=opt_str(body, "model"))


def parse_include(value: object) -> set[str]:
    if value is None:
        return set()
    if not isinstance(value, list):
        raise wrong_type("include", "an array of strings", value)
    for i, v in enumerate(value):
        if not isinstance(v, str) or v not in INCLUDES:
            raise out_of_range(f"include.{i}", "one of " + ", ".join(sorted(INCLUDES)), v)
        if v == "message.output_text.logprobs":
            raise ApiError(400, "unsupported_value", "log probabilities are not served on /v1/responses; use "
                                                     "/v1/chat/completions", param=f"include.{i}")
    # the hosted tools' includes are no-ops: none of those tools runs here, so there is nothing to include
    return set(value)


def parse_text(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise wrong_type("text", "an object", value)
    for key in value:
        if key not in ("format", "verbosity"):
            raise ApiError(400, "unsupported_parameter", f"'text.{key}' is not supported", param=f"text.{key}")
    verbosity = value.get("verbosity")  # accepted, ignored: a hint to hosted models
    if verbosity is not None and verbosity not in ("low", "medium", "high"):
        raise out_of_range("text.verbosity", "'low', 'medium' or 'high'", verbosity)
    fmt = value.get("format")
    if fmt is None:
        return
    if not isinstance(fmt, dict):
        raise wrong_type("text.format", "an object", fmt)
    if fmt.get("type") != "text":
        raise ApiError(400, "unsupported_value", f"text.format {fmt.get('type')!r} is not supported: output is not "
                                                 "constrained (structured outputs are not built)",
                       param="text.format.type")


def parse_metadata(value: object) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise wrong_type("metadata", "an object of strings", value)
    return value


def parse_reasoning(value: object) -> dict:
    """{"effort", "summary"} as the reply states them; the effort reaches the template."""
    if value is None:
        return {"effort": None, "summary": None}
    if not isinstance(value, dict):
        raise wrong_type("reasoning", "an object", value)
    for key in value:
        if key not in ("effort", "summary", "generate_summary", "mode", "context"):
            raise ApiError(400, "unsupported_parameter", f"'reasoning.{key}' is not supported",
                           param=f"reasoning.{key}")
    effort = value.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise out_of_range("reasoning.effort", "one of " + ", ".join(EFFORTS), effort)
    summary = value.get("summary", value.get("generate_summary"))  # accepted: the reasoning comes as it is
    if summary is not None and summary not in SUMMARIES:
        raise out_of_range("reasoning.summary", "one of " + ", ".join(SUMMARIES), summary)
    return {"effort": effort, "summary": summary}


# ---- tools --------------------------------------------------------------------------

def parse_tools(value: object, choice: object) -> tuple[Tools, dict[str, tuple[str, str]]]:
    if value is not None and not isinstance(value, list):
        raise wrong_type("tools", "an array", value)
    declared: list[dict] = []
    namespaces: dict[str, tuple[str, str]] = {}
    strict = False
    for i, tool in enumerate(value or []):
        where = f"tools.{i}"
        if not isinstance(tool, dict):
            raise wrong_type(where, "an object", tool)
        kind = tool.get("type")
        if kind == "function":
            declared.append(function_tool(tool, where))
            strict = strict or tool.get("strict") is True
        elif kind == "namespace":
            ns = tool.get("name")
            if not isinstance(ns, str) or not TOOL_NAME.match(ns):
                raise bad_request("invalid_value", "a namespace name must be 1-64 letters, digits, '_', '-', '.' "
                                                   "or ':'", f"{where}.name")
            inner = tool.get("tools")
            if not isinstance(inner, list) or not inner:
                raise wrong_type(f"{where}.tools", "a non-empty array of function tools", inner)
            for j, t in enumerate(inner):
                if not isinstance(t, dict) or t.get("type") != "function":
                    raise ApiError(400, "unsupported_value", "only function tools are supported inside a namespace",
                                   param=f"{where}.tools.{j}.type")
                chat_tool = function_tool(t, f"{where}.tools.{j}", prefix=ns + ".")
                namespaces[chat_tool["function"]["name"]] = (ns, t["name"])
                declared.append(chat_tool)
                strict = strict or t.get("strict") is True
        elif kind in WEB_SEARCH:
            continue  # a hosted search this server cannot run: not offered (the model never calls it)
        else:
            raise ApiError(400, "unsupported_value", f"tools of type {kind!r} are not supported: this server runs no "
                                                     "hosted tools; declare functions", param=f"{where}.type")
    names = [t["function"]["name"] for t in declared]
    if len(set(names)) != len(names):
        raise bad_request("invalid_value", "two tools share a name", "tools")
    return Tools(declared=declared, choice=tool_choice(choice, names, declared), strict=strict), namespaces


def function_tool(tool: dict, where: str, prefix: str = "") -> dict:
    """A Responses function tool in the chat shape, keys in OpenAI's order (name, description,
    parameters): one tool renders one prompt on every route."""
    name = tool.get("name")
    if not isinstance(name, str) or not TOOL_NAME.match(prefix + name):
        raise bad_request("invalid_value", "a function name must be 1-64 letters, digits, '_', '-', '.' or ':'",
                          f"{where}.name")
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise wrong_type(f"{where}.description", "a string", description)
    parameters = tool.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise wrong_type(f"{where}.parameters", "a JSON Schema object", parameters)
    strict = tool.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise wrong_type(f"{where}.strict", "a boolean", strict)
    fn = {"name": prefix + name}
    if description is not None:
        fn["description"] = description
    if parameters is not None:
        fn["parameters"] = parameters
    return {"type": "function", "function": fn}


def tool_choice(value: object, names: list[str], declared: list[dict]) -> ToolChoice:
    if value is None:
        return ToolChoice("auto" if names else "none")
    if value in ("none", "auto", "required"):
        if value == "required" and not names:
            raise bad_request("invalid_value", "tool_choice 'required' needs at least one function tool",
                              "tool_choice")
        return ToolChoice(value if names else "none")
    if isinstance(value, dict) and value.get("type") == "function":
        name = value.get("name")
        if name not in names:
            raise bad_request("invalid_value", f"tool_choice names {name!r}, which is not among the declared "
                                               "function tools", "tool_choice.name")
        return ToolChoice("function", name)
    if isinstance(value, dict) and value.get("type") == "allowed_tools":
        mode, allowed = value.get("mode"), value.get("tools")
        if mode not in ("auto", "required"):
            raise out_of_range("tool_choice.mode", "'auto' or 'required'", mode)
        if not isinstance(allowed, list):
            raise wrong_type("tool_choice.tools", "an array of tool definitions", allowed)
        keep = set()
        for j, t in enumerate(allowed):
            if not isinstance(t, dict) or t.get("type") != "function" or t.get("name") not in names:
                raise bad_request("invalid_value", "tool_choice.tools may name only declared function tools",
                                  f"tool_choice.tools.{j}")
            keep.add(t["name"])
        declared[:] = [t for t in declared if t["function"]["name"] in keep]  # the rest are not offered
        return ToolChoice(mode)
    kind = value.get("type") if isinstance(value, dict) else value
    raise ApiError(400, "unsupported_value", f"tool_choice {kind!r} is not supported: 'none', 'auto', 'required', "
                                             "a function or allowed_tools", param="tool_choice")


# ---- input items --------------------------------------------------------------------

def parse_input(value: object) -> list[dict]:
    """This request's items, checked; a string is one user message."""
    if value is None:
        raise ApiError(400, "missing_required_parameter", "'input' is required", param="input")
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise wrong_type("input", "a string or an array of input items", value)
    for i, item in enumerate(value):
        check_item(item, f"input.{i}")
    return list(value)


def check_item(item: object, where: str) -> None:
    if not isinstance(item, dict):
        raise wrong_type(where, "an object", item)
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in ROLES:
            raise ApiError(400, "unsupported_role", f"role {role!r} is not supported", param=f"{where}.role")
        message_text(item.get("content"), f"{where}.content")
    elif kind == "function_call":
        for key in ("call_id", "name", "arguments"):
            if not isinstance(item.get(key), str):
                raise wrong_type(f"{where}.{key}", "a string", item.get(key))
        if item.get("namespace") is not None and not isinstance(item["namespace"], str):
            raise wrong_type(f"{where}.namespace", "a string", item["namespace"])
    elif kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise ApiError(400, "missing_required_parameter", "a function_call_output needs the 'call_id' it "
                                                              "answers", param=f"{where}.call_id")
        output = item.get("output")
        if isinstance(output, list):
            message_text(output, f"{where}.output")
        elif not isinstance(output, str):
            raise wrong_type(f"{where}.output", "a string or an array of input_text parts", output)
    elif kind == "reasoning":
        for key in ("summary", "content"):
            parts = item.get(key)
            if parts is not None and (not isinstance(parts, list) or not all(
                    isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts)):
                raise wrong_type(f"{where}.{key}", "an array of text parts", parts)
        if item.get("encrypted_content") is not None and not isinstance(item["encrypted_content"], str):
            raise wrong_type(f"{where}.encrypted_content", "a string", item["encrypted_content"])
    elif kind == "item_reference":
        raise ApiError(400, "unsupported_value", "item references are not supported: send the item itself, or "
                                                 "'previous_response_id'", param=f"{where}.type")
    else:
        raise ApiError(400, "unsupported_value", f"input items of type {kind!r} are not supported: messages, "
                                                 "function_call, function_call_output and reasoning are",
                       param=f"{where}.type")


TEXT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}


def message_text(content: object, where: str) -> str:
    """A message's text: a string, or its text parts joined by newlines."""
    if content is None:
        raise wrong_type(where, "a string or an array of content parts", content)
    return content_text(content, where, TEXT_PARTS)


def reasoning_text(item: dict) -> str:
    """A reasoning item's text: its reasoning_text parts, else what this server put in its
    encrypted_content, else its summary."""
    content = [p["text"] for p in item.get("content") or []]
    if content:
        return "\n".join(content)
    blob = item.get("encrypted_content")
    if isinstance(blob, str) and blob.startswith(ENCRYPTED_PREFIX):
        try:
            return base64.b64decode(blob[len(ENCRYPTED_PREFIX):], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            pass
    return "\n".join(p["text"] for p in item.get("summary") or [])


def encrypted(text: str) -> str:
    return ENCRYPTED_PREFIX + base64.b64encode(text.encode("utf-8")).decode("ascii")


def conversation(items: list[dict], first_new: int, instructions: str | None,
                 namespaces: dict[str, tuple[str, str]]) -> list[Message]:
    """The messages a template renders from a conversation's items (see the module's notes)."""
    offered = {v: k for k, v in namespaces.items()}  # (namespace, name) -> the name the model was offered
    system = [instructions] if instructions else []
    messages: list[Message] = []
    names: dict[str, str] = {}  # call_id -> function name, for the tool messages that answer them
    reasoning: list[str] = []  # reasoning items waiting for the assistant turn they belong to

    def user(text: str) -> None:
        reasoning.clear()  # reasoning belongs to the assistant turn that follows it, if one does
        if messages and messages[-1].role == "user":
            messages[-1].content += "\n\n" + text
        else:
            messages.append(Message("user", text))

    def assistant() -> Message:
        if not (messages and messages[-1].role == "assistant"):
            messages.append(Message("assistant", ""))
        turn = messages[-1]
        if reasoning:
            turn.reasoning_content = "\n".join(filter(None, [turn.reasoning_content, *reasoning]))
            reasoning.clear()
        return turn

    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            role = item["role"]
            text = message_text(item["content"], f"input.{i - first_new}.content")
            if role in ("system", "developer"):
                if messages:
                    user(text)  # a later instruction, read where it stands
                else:
                    system.append(text)
            elif role == "user":
                user(text)
            else:
                turn = assistant()
                if turn.tool_calls:  # text after calls starts the next turn
                    messages.append(Message("assistant", text))
                else:
                    turn.content = f"{turn.content}\n\n{text}" if turn.content else text
        elif kind == "reasoning":
            text = reasoning_text(item)
            if text:
                reasoning.append(text)
        elif kind == "function_call":
            ns = item.get("namespace")
            name = offered.get((ns, item["name"]), f"{ns}.{item['name']}" if ns else item["name"])
            names[item["call_id"]] = name
            turn = assistant()
            turn.tool_calls = (turn.tool_calls or []) + [{"id": item["call_id"], "type": "function", "function": {
                "name": name, "arguments": decoded_arguments(item["arguments"])}}]
        elif kind == "function_call_output":
            reasoning.clear()
            output = item["output"]
            text = output if isinstance(output, str) else message_text(output, f"input.{i - first_new}.output")
            messages.append(Message("tool", text, tool_call_id=item["call_id"], name=names.get(item["call_id"])))
    if system:
        messages.insert(0, Message("system", "\n\n".join(system)))
    return messages


def decoded_arguments(arguments: str) -> object:
    """A call's arguments as templates iterate them: the decoded object where it is JSON."""
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments

