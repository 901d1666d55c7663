"""The System One request: a document (`state`), up to 64 closed questions, and how to score
them; every refusal is a 422 whose `detail` locates the field (docs/system-one.md#errors).

    req = parse_systemone(body, kv_slots)
    req.questions[0].text, req.questions[0].options     # the question as the model reads it

Question types and their options:
  noul    yes / no            criteria: optional {"true": ..., "false": ...}
  choice  the labels          criteria: {label: description or null}, 1-255 labels
  score   "1" .. "n"          criteria: [level description or null, ...], 1-255 levels
"""
from __future__ import annotations

import json
import re

from colibri.api.errors import ApiError
from colibri.serving.systemone import Question, SystemOneRequest

MAX_QUESTIONS = 64
MAX_OPTIONS = 255
TYPES = ("noul", "choice", "score")
DEFAULT_INSTRUCTIONS = {"noul": "Is this true?", "choice": "Which of the following applies?",
                        "score": "Rate this on the scale below."}


class Invalid(ApiError):
    """A 422 with FastAPI-style `detail` (loc, msg, type), as the upstream clients expect."""

    def __init__(self, param: str, message: str, code: str = "invalid_value"):
        super().__init__(422, code, message, param=param)

    def body(self) -> dict:
        loc = ["body"] + [int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]\.?", self.param or "") if p]
        return {**super().body(), "detail": [{"loc": loc, "msg": self.message, "type": "value_error"}]}


def state_text(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, indent=2, ensure_ascii=False)


def parse_systemone(body: dict, kv_slots: int) -> SystemOneRequest:
    if "state" not in body:
        raise Invalid("state", "'state' is required (a string, object or array; \"\" is allowed)")
    state = body["state"]
    if not isinstance(state, (str, dict, list)):
        raise Invalid("state", "'state' must be a string, an object or an array")
    questions = body.get("questions")
    if not isinstance(questions, dict) or not 1 <= len(questions) <= MAX_QUESTIONS:
        raise Invalid("questions", f"'questions' must be an object of 1 to {MAX_QUESTIONS} questions by id",
                      "invalid_question")
    normalize = body.get("normalize", "sum") or "sum"
    if normalize not in ("sum", "mean"):
        raise Invalid("normalize", "'normalize' must be 'sum' or 'mean'")
    prefix = body.get("prefix")
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise Invalid("prefix", "'prefix' must be a non-empty string")
    pin = body.get("pin_state")
    if pin is not None and not isinstance(pin, bool):
        raise Invalid("pin_state", "'pin_state' must be a boolean")
    slot = body.get("cache_slot")
    if slot is not None and (isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < kv_slots):
        raise Invalid("cache_slot", f"'cache_slot' must be an integer in [0, {kv_slots})")
    return SystemOneRequest(state=state_text(state), questions=[parse_question(k, v) for k, v in questions.items()],
                            normalize=normalize, prefix=prefix, pin_state=pin, cache_slot=slot)


def parse_question(qid: str, q: object) -> Question:
    where = f"questions.{qid}"
    if not isinstance(q, dict):
        raise Invalid(where, "a question must be an object {type, instructions?, criteria}", "invalid_question")
    kind = q.get("type")
    if kind not in TYPES:
        raise Invalid(f"{where}.type", f"'type' must be one of {', '.join(TYPES)}", "invalid_question")
    instructions = q.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise Invalid(f"{where}.instructions", "'instructions' must be a string", "invalid_question")
    head = (instructions or "").strip() or DEFAULT_INSTRUCTIONS[kind]
    criteria = q.get("criteria")
    if kind == "noul":
        return noul(qid, where, head, criteria)
    if kind == "choice":
        return choice(qid, where, head, criteria)
    return score(qid, where, head, criteria)


def _description(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(where, "a criterion must be a string or null", "invalid_question")
    return value.strip()


def noul(qid: str, where: str, head: str, criteria: object) -> Question:
    lines = [head]
    if criteria is not None:
        if not isinstance(criteria, dict) or set(criteria) - {"true", "false"}:
            raise Invalid(f"{where}.criteria", "noul criteria are {\"true\": ..., \"false\": ...}", "invalid_question")
        for key, word in (("true", "yes"), ("false", "no")):
            text = _description(criteria.get(key), f"{where}.criteria.{key}")
            if text:
                lines.append(f"{word}: {text}")
    lines.append("Answer yes or no.")
    return Question(qid, "noul", "\n".join(lines), ["yes", "no"], ["yes", "no"])


def choice(qid: str, where: str, head: str, criteria: object) -> Question:
    if not isinstance(criteria, dict) or not 1 <= len(criteria) <= MAX_OPTIONS:
        raise Invalid(f"{where}.criteria", f"choice criteria are {{label: description or null}}, 1 to {MAX_OPTIONS} "
                                           "labels", "invalid_question")
    lines = [head, "Options:"]
    for label, desc in criteria.items():
        if not label.strip():
            raise Invalid(f"{where}.criteria", "a label must not be empty", "invalid_question")
        text = _description(desc, f"{where}.criteria.{label}")
        lines.append(f"- {label}: {text}" if text else f"- {label}")
    lines.append("Answer with one of the options.")
    labels = list(criteria)
    return Question(qid, "choice", "\n".join(lines), labels, labels)


def score(qid: str, where: str, head: str, criteria: object) -> Question:
    if not isinstance(criteria, list) or not 1 <= len(criteria) <= MAX_OPTIONS:
        raise Invalid(f"{where}.criteria", f"score criteria are a list of 1 to {MAX_OPTIONS} levels",
                      "invalid_question")
    texts = [_description(c, f"{where}.criteria[{i}]") for i, c in enumerate(criteria)]
    legend = {str(i): t if t else f"level {i}" for i, t in enumerate(texts)}
    lines = [head, "Scale:"] + [f"{i + 1}: {legend[str(i)]}" for i in range(len(texts))]
    lines.append("Answer with the number.")
    return Question(qid, "score", "\n".join(lines), [str(i + 1) for i in range(len(texts))],
                    [str(i) for i in range(len(texts))], legend)
