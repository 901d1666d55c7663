"""gpt-oss's harmony format: a reply is a run of messages, each a header and a body,

    <|channel|>analysis<|message|>REASONING<|end|>
    <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
    <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{ARGS}<|call|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{ARGS}<|call|>

(the prompt ends in `<|start|>assistant`, so the first header is the model's from its
channel on). The analysis channel is reasoning; final, and commentary addressed to no one
(a preamble the user may see), are the answer; a message addressed to `functions.NAME` is a
tool call, the recipient in the role header or in the channel header. `<|return|>` and
`<|call|>` end generation (the engine's end-of-generation tokens, llama.cpp's list); `<|end|>`
ends one message and the model goes on.

HarmonySplitter takes the place of the <think> splitter for this family, with its interface:
feed(text) -> (reasoning, content) as text streams in, flush(), and `answer`, the input
characters that became content. A tool-call message goes to content as OPENER + NAME +
`<|message|>` + its arguments, so the tool section (the HARMONY format's opener) starts
there; a forced call is opened in the prompt with the template's own header for past calls.
A header the model never closes is text after all (a model that ignores the format loses
nothing), and a message of another role (the model writing the user's turn) ends the reply.
"""
from __future__ import annotations

from colibri.chat.spans import Spans
from colibri.chat.tool_calls import ParsedCall, Section, ToolFormat, json_arguments

START, END, MESSAGE, CHANNEL, CONSTRAIN = "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>"
RETURN, CALL = "<|return|>", "<|call|>"
TAGS = (START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL)
OPENER = " to=functions."  # a call's opening as the template writes past calls: `<|start|>assistant to=functions.`
HEADER_LIMIT = 256  # characters of a header without its <|message|>: past this it is text, not a header
HEADER_WORDS = 6  # ... or words (a header has a role, a channel, a recipient and a content type at most)


def is_harmony(template_source: str | None) -> bool:
    return bool(template_source) and "<|channel|>" in template_source and "<|message|>" in template_source


class HarmonySplitter:
    """(reasoning, content) of a harmony reply as it streams; `tail`: the prompt's text from its
    last <|start|> (the header, or the open message, the reply continues), `tools`: calls go to
    the tool section (else a call's arguments are reasoning: the model acting on its own)."""

    def __init__(self, tail: str = START + "assistant", tools: bool = False):
        self.answer = Spans()
        self.tools = tools
        self.ended = False  # a message of another role began: the reply is over
        self._state = "between"  # between messages, in a "header", or in a "body" of self._kind
        self._kind = "content"
        self._header = ""  # the header so far (text after <|start|> or from <|channel|>)
        self._header_at = 0  # input offset where it began
        self._inherited = 0  # characters of the header that are the prompt's (never emitted as text)
        self._held = ""
        self._pos = 0
        self._muted = True  # the prompt's tail is read for the state it leaves, nothing emitted
        self.feed(tail)
        self._muted = False
        self.answer, self._pos, self._header_at, self._held = Spans(), 0, 0, ""
        self._inherited = len(self._header)

    def feed(self, text: str) -> tuple[str, str]:
        buf = self._held + text
        base = self._pos - len(self._held)
        self._pos += len(text)
        self._held = ""
        reasoning: list[str] = []
        content: list[str] = []
        while buf and not self.ended:
            tag_at, tag = _next_tag(buf)
            if tag is None:  # no whole tag: keep what could be the start of one
                keep = _partial(buf)
                self._text(buf[:len(buf) - keep], base, reasoning, content)
                self._held = buf[len(buf) - keep:]
                break
            self._text(buf[:tag_at], base, reasoning, content)
            self._tag(tag, base + tag_at, reasoning, content)
            cut = tag_at + len(tag)
            buf, base = buf[cut:], base + cut
        if self._muted:
            return "", ""
        return "".join(reasoning), "".join(content)

    def flush(self) -> tuple[str, str]:
        held, self._held = self._held, ""
        reasoning: list[str] = []
        content: list[str] = []
        if not self.ended:
            self._text(held, self._pos - len(held), reasoning, content)
            if self._state == "header":  # never closed: it was text
                self._header_as_text(content)
        return "".join(reasoning), "".join(content)

    # ---- the states ----------------------------------------------------------------------------

    def _text(self, text: str, at: int, reasoning: list[str], content: list[str]) -> None:
        if not text:
            return
        if self._state == "header":
            self._header += text
            mine = self._header[self._inherited:]
            if len(mine) > HEADER_LIMIT or "\n" in mine or len(mine.split()) > HEADER_WORDS:
                self._header_as_text(content)  # no header: the model writes plain text
            return
        if self._state == "between":  # text outside any message: the answer (layout whitespace aside)
            stripped = text.lstrip()
            if not stripped:
                return
            at, text = at + len(text) - len(stripped), stripped
            self._state, self._kind = "body", "content"
        if self._kind == "reasoning":
            reasoning.append(text)
        elif self._kind in ("content", "call"):
            content.append(text)
            self.answer.add(at, at + len(text))

    def _tag(self, tag: str, at: int, reasoning: list[str], content: list[str]) -> None:
        if self._state == "header":
            if tag == MESSAGE:
                self._open_body(content)
            elif tag in (CHANNEL, CONSTRAIN):
                self._header += tag
            else:  # <|end|>, <|return|>, <|call|>, <|start|>: no body after all
                self._header = ""
                self._state = "between"
                if tag == START:
                    self._begin_header(at + len(START), "")
            return
        if tag == START:
            self._begin_header(at + len(START), "")
        elif tag == CHANNEL:  # a header without <|start|> (the reply's first, after the prompt's cue)
            self._begin_header(at, CHANNEL)
        elif tag in (END, RETURN, CALL):
            self._state = "between"
        elif self._state == "body" and self._kind in ("content", "call"):  # a stray tag in a body: text
            content.append(tag)
            self.answer.add(at, at + len(tag))
        elif self._state == "body" and self._kind == "reasoning":
            reasoning.append(tag)

    def _begin_header(self, at: int, text: str) -> None:
        self._state, self._header, self._header_at, self._inherited = "header", text, at, 0

    def _header_as_text(self, content: list[str]) -> None:
        """The header so far was the answer's text after all (the prompt's part of it aside)."""
        text = self._header[self._inherited:]
        self._state, self._kind, self._header, self._inherited = "body", "content", "", 0
        if text and not self._muted:
            content.append(text)
            self.answer.add(self._header_at, self._header_at + len(text))

    def _open_body(self, content: list[str]) -> None:
        role, channel, recipient = parse_header(self._header)
        self._state = "body"
        if role not in ("", "assistant"):  # the model began another role's turn: its reply is over
            self.ended = True
        elif recipient.startswith("functions.") and self.tools:
            self._kind = "call"
            content.append(OPENER + recipient[len("functions."):] + MESSAGE)  # the tool section's opener
        elif recipient or channel == "analysis":
            self._kind = "reasoning"
        else:  # final, commentary to no one, or no channel
            self._kind = "content"
        self._header, self._inherited = "", 0


def parse_header(header: str) -> tuple[str, str, str]:
    """(role, channel, recipient) of a header: `assistant to=functions.f<|channel|>commentary json`,
    `<|channel|>commentary to=functions.f <|constrain|>json`, `assistant<|channel|>final`, `assistant`.
    The last channel counts (gpt-oss-20b sometimes writes a stray `<|channel|>commentary` first, as
    llama.cpp's parser notes), and `to=assistant` addresses no one."""
    head, *channels = header.replace(CONSTRAIN, " ").split(CHANNEL)
    words = head.split()
    role = words[0] if words and not words[0].startswith("to=") else ""
    recipient = ""
    for word in words + [w for c in channels for w in c.split()]:
        if word.startswith("to=") and word != "to=assistant":
            recipient = word[3:]
    last = channels[-1].split() if channels else []
    return role, (last[0] if last else ""), recipient


class Harmony(ToolFormat):
    """Harmony's tool calls, as the tool section sees them: `NAME[ header words]<|message|>ARGS`
    after OPENER (the splitter writes them so; a forced call's prompt ends in the template's own
    header), the arguments ending at <|call|> (an end-of-generation token, so usually the text's end)."""

    name, opener = "harmony", OPENER
    markers = TAGS

    def call_opening(self, name: str, prompt: str = "") -> str:
        return f"{OPENER}{name}{CHANNEL}commentary json{MESSAGE}"

    def parse(self, section: str, schemas: dict[str, dict]) -> Section:
        out = Section()
        for piece in section.split(OPENER):
            if not piece.strip():
                continue
            head, sep, body = piece.partition(MESSAGE)
            if not sep:
                out.calls.append(ParsedCall("", text=piece, complete=False, problem="the call has no <|message|>"))
                continue
            name = head.replace(CHANNEL, " ").replace(CONSTRAIN, " ").split()
            name = name[0] if name else ""
            ends = [i for i in (body.find(CALL), body.find(END), body.find(RETURN)) if i >= 0]
            closed = bool(ends)
            call = ParsedCall(name)
            json_arguments(call, body[:min(ends)] if ends else body, closed=True)
            if not name or any(c in name for c in "<>{}\"'"):
                call.name, call.problem = "", call.problem or "the call has no function name"
            out.calls.append(call)
            if closed:
                out.stray += body[min(ends):].replace(CALL, "", 1)
        return out


HARMONY = Harmony()


def _next_tag(buf: str) -> tuple[int, str | None]:
    best, found = len(buf), None
    for tag in TAGS:
        i = buf.find(tag, 0, best + len(tag))
        if 0 <= i < best:
            best, found = i, tag
    return best, found


def _partial(buf: str) -> int:
    """How many characters at buf's end could begin a tag."""
    i = buf.rfind("<", max(0, len(buf) - max(map(len, TAGS)) + 1))
    if i < 0:
        return 0
    tail = buf[i:]
    return len(tail) if any(t.startswith(tail) for t in TAGS) else 0
