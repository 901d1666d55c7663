"""System One: closed questions about a document, answered by reading the probability
of each allowed answer (no text is generated), under one slot admission for the whole request.

Each option is scored as a raw prompt (no chat template):
    SP = [prefix + "\\n\\n"] + ["Context:\\n" + state + "\\n\\n"]
    QP = SP + "Question: <text>\\nAnswer:"          option prompt = QP + " " + option
its score is the sum (or `mean`) of the engine's read-out log-probs over the option's
own tokens; a softmax across the options gives the probabilities. Each answer also
carries its normalised entropy -sum(p ln p) / ln n (0 sure .. 1 no idea; the upstream
leaves this to clients).

Prefix reuse: the options of a question share QP, the questions share SP. The
calls run on one slot, in prompt order, and each reads out only from where its
option's own tokens start (echo_from), so the prefix before comes from the
slot's cache: a question's first option prefills what the slot lacks, the
others little more than their own tokens. `x-colibri-prefill-tokens` /
`x-colibri-reused-tokens` report what the engine prefilled and took from its
cache.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from colibri.errors import ContextExceeded, ModelOutputRefused
from colibri.serving.core import ServingCore
from colibri.serving.engine_thread import Finish
from colibri.serving.generation import Session


@dataclass
class Question:
    id: str
    type: str
    text: str  # the question as the prompt spells it
    options: list[str]  # what the model may answer, scored one by one
    labels: list[str]  # the reply's keys for the options (choice labels, "0".. for score levels)
    legend: dict[str, str] = field(default_factory=dict)  # score: level -> its description


@dataclass
class SystemOneRequest:
    state: str
    questions: list[Question]
    normalize: str = "sum"
    prefix: str | None = None
    pin_state: bool | None = None  # accepted; colibri's slots keep the document without pins
    cache_slot: int | None = None


@dataclass
class Scored:
    """The answers of one request and what the engine did for them."""

    answers: dict[str, dict]
    input_tokens: int  # the longest option prompt
    output_tokens: int  # the option tokens scored
    wait_s: float
    prefilled: int
    reused: int
    calls: int


def prompts(req: SystemOneRequest, q: Question) -> tuple[str, list[str]]:
    shared = (req.prefix + "\n\n" if req.prefix else "") + (f"Context:\n{req.state}\n\n" if req.state else "")
    question = f"{shared}Question: {q.text}\nAnswer:"
    return question, [f"{question} {option}" for option in q.options]


def softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def confidence(probs: list[float]) -> float:
    n = len(probs)
    return 1.0 if n < 2 else max(0.0, (n * max(probs) - 1) / (n - 1))


def entropy(probs: list[float]) -> float:
    """-sum p ln p / ln n: 0 when one answer holds all the mass, 1 when all are alike."""
    n = len(probs)
    if n < 2:
        return 0.0
    return max(0.0, -sum(p * math.log(p) for p in probs if p > 0) / math.log(n))


def r6(x: float) -> float:
    return round(x, 6)


def answer(q: Question, probs: list[float]) -> dict:
    if q.type == "noul":
        return {"type": "noul", "noul": r6(probs[0]), "entropy": r6(entropy(probs))}
    table = {label: r6(p) for label, p in zip(q.labels, probs)}
    out: dict = {"type": q.type}
    if q.type == "choice":
        out["choice"] = q.labels[max(range(len(probs)), key=probs.__getitem__)]  # the first wins a tie
    else:
        out["score"] = r6(sum(i * p for i, p in enumerate(probs)))
        out["legend"] = q.legend
    out.update(probabilities=table, confidence=r6(confidence(probs)), entropy=r6(entropy(probs)))
    return out


class Scorer:
    """The engine calls of one request, on the session it was admitted to."""

    def __init__(self, session: Session):
        self.session = session
        self.prefilled = self.reused = self.calls = 0

    async def read_out(self, tokens: list[int], echo_from: int = 0) -> Finish:
        finish = await self.session.read_out(tokens, echo_from)
        self.calls += 1
        self.prefilled += finish.n_prompt - finish.n_reused
        self.reused += finish.n_reused
        return finish

    async def option_score(self, question: list[int], option: list[int], mean: bool) -> tuple[float, int]:
        """(log-prob of the option's tokens after the question, how many there are)."""
        n_prefix = 0
        while n_prefix < min(len(question), len(option)) and question[n_prefix] == option[n_prefix]:
            n_prefix += 1  # where the tokens of the answer start (a merge across the boundary moves it)
        finish = await self.read_out(option, echo_from=n_prefix)
        values = [pos.logprob for pos in finish.prompt_readout[n_prefix:]
                  if pos.logprob is not None and not math.isnan(pos.logprob)]
        if not values:
            raise ModelOutputRefused("engine_error", "an option has no tokens of its own to score")
        total = sum(values)
        return (total / len(values) if mean else total), len(values)


async def score(core: ServingCore, req: SystemOneRequest) -> Scored:
    """Every question's answer, under one slot admission for the whole request."""
    served = core.served
    plans = []
    for q in req.questions:
        question, options = prompts(req, q)
        plans.append((q, served.tokenize_completion(question), [served.tokenize_completion(o) for o in options]))
    longest = max(len(t) for _, _, opts in plans for t in opts)
    if longest >= served.n_ctx:
        raise ContextExceeded(longest, served.n_ctx, "state")
    answers, output_tokens = {}, 0
    async with core.admit(req.cache_slot, plans[0][2][0]) as session:
        scorer = Scorer(session)
        for q, question, options in plans:
            if len(options) == 1:  # a single allowed answer is certain: no engine call
                answers[q.id] = answer(q, [1.0])
                continue
            scored = [await scorer.option_score(question, o, req.normalize == "mean") for o in options]
            output_tokens += sum(n for _, n in scored)
            answers[q.id] = answer(q, softmax([s for s, _ in scored]))
        wait_s = session.lease.wait_s
    return Scored(answers, longest, output_tokens, wait_s, scorer.prefilled, scorer.reused, scorer.calls)
