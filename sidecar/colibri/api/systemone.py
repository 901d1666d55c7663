"""POST /v1/systemone: closed questions about a document, answered by reading the probability
of each allowed answer (no text is generated), under one slot admission for the whole request.

Each option is scored as a raw prompt (no chat template):
    SP = [prefix + "\\n\\n"] + ["Context:\\n" + state + "\\n\\n"]
    QP = SP + "Question: <text>\\nAnswer:"          option prompt = QP + " " + option
its score is the sum (or `mean`) of the engine's read-out log-probs over the option's
own tokens; a softmax across the options gives the probabilities. Each answer also
carries its normalised entropy -sum(p ln p) / ln n (0 sure .. 1 no idea; the upstream
leaves this to clients).

Prefix reuse: the options of a question share QP, the questions share SP. The
calls run on one slot, in prompt order, and `x-colibri-prefill-tokens` /
`x-colibri-reused-tokens` report what the engine prefilled and took from its
cache. The engine's read-out (echo) currently forfeits prefix reuse, so every
option prefills its whole prompt.
"""
from __future__ import annotations

import math
import secrets
import time

from aiohttp import web

from colibri.api.body import read_json_object
from colibri.api.errors import ApiError, json_response
from colibri.api.keys import config_key, metrics_key, model_key, scheduler_key
from colibri.api.serving import ServedModel
from colibri.api.systemone_protocol import Question, SystemOneRequest, parse_systemone
from colibri.engine_thread import Finish, GenRequest
from colibri.scheduler import Lease

routes = web.RouteTableDef()


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
    """The engine calls of one request, on the slot it was admitted to."""

    def __init__(self, served: ServedModel, lease: Lease, observer):
        self.served, self.lease, self.observer = served, lease, observer
        self.prefilled = self.reused = self.calls = 0

    async def read_out(self, tokens: list[int], echo_from: int = 0) -> Finish:
        """A pure scoring pass: no token generated, the read-out of the prompt positions from
        echo_from on (the prefix before it may come from the slot's cache)."""
        req = GenRequest(slot=self.lease.slot, prompt=tokens, max_tokens=0, temperature=0.0, top_p=1.0, echo=True,
                         echo_from=echo_from)
        t0 = time.monotonic()
        finish = None
        try:
            async for ev in self.served.events(req):
                if isinstance(ev, Finish):
                    finish = ev
        finally:
            self.observer.observe("engine_call", time.monotonic() - t0)
        if finish is None or finish.reason == "error" or finish.prompt_readout is None:
            raise ApiError(500, "engine_logprob_records_incomplete", "the engine returned no read-out for a "
                                                                     "System One option")
        self.calls += 1
        self.prefilled += finish.n_prompt - finish.n_reused
        self.reused += finish.n_reused
        self.lease.tokens = list(tokens)
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
            raise ApiError(502, "engine_error", "an option has no tokens of its own to score")
        total = sum(values)
        return (total / len(values) if mean else total), len(values)


@routes.post("/v1/systemone")
async def systemone(request: web.Request) -> web.Response:
    started = time.monotonic()
    app = request.app
    body = await read_json_object(request, app[config_key].max_body_bytes)
    served = app[model_key]
    req = parse_systemone(body, served.n_slots)
    tokenize = served.tokenize_completion
    plans = []
    for q in req.questions:
        question, options = prompts(req, q)
        plans.append((q, tokenize(question), [tokenize(o) for o in options]))
    longest = max(len(t) for _, _, opts in plans for t in opts)
    if longest >= served.n_ctx:
        from colibri.api.serving import context_exceeded

        raise context_exceeded(longest, served.n_ctx, "state")
    answers, output_tokens = {}, 0
    async with app[scheduler_key].admit(req.cache_slot, plans[0][2][0]) as lease:  # one admission for all
        scorer = Scorer(served, lease, app[metrics_key])
        for q, question, options in plans:
            if len(options) == 1:  # a single allowed answer is certain: no engine call
                answers[q.id] = answer(q, [1.0])
                continue
            scored = [await scorer.option_score(question, o, req.normalize == "mean") for o in options]
            output_tokens += sum(n for _, n in scored)
            answers[q.id] = answer(q, softmax([s for s, _ in scored]))
        wait_ms = round(lease.wait_s * 1000)
    headers = {"x-colibri-queue-wait-ms": str(wait_ms),
               "x-colibri-elapsed-ms": str(round((time.monotonic() - started) * 1000)),
               "x-colibri-prefill-tokens": str(scorer.prefilled), "x-colibri-reused-tokens": str(scorer.reused),
               "x-colibri-engine-calls": str(scorer.calls)}
    return json_response({"id": "req_" + secrets.token_hex(16), "model": served.model_id, "provider": "colibri",
                          "answers": answers, "usage": {"input_tokens": longest, "output_tokens": output_tokens,
                                                        "cost": 0}}, headers=headers)
