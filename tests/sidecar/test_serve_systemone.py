"""System One (POST /v1/systemone) on the real engine (the default model): the raw prompts of
docs/system-one.md#prompts, option scores equal to the engine's own read-out summed over each
option's tokens, softmax, confidence and normalised entropy, the reply shape and headers, one
admission for the whole request, the prefill the engine spent, and 422s that locate the field."""
from __future__ import annotations

import asyncio
import math

import pytest

from colibri.serving.systemone import confidence, entropy, prompts, softmax
from colibri.api.systemone_protocol import Invalid, parse_systemone
from colibri.serving.engine_thread import Finish, GenRequest
from colibri.serve_config import ServeConfig
from tests.sidecar.serve_support import close_served, open_served, run_app

CFG = ServeConfig(model_id="gemma-3-270m", kv_slots=2, ctx=512, threads=2, kv_persist=False)
TICKET = "My invoice shows a double charge and the app crashes when I open the billing page."
QUESTIONS = {
    "urgent": {"type": "noul", "criteria": {"true": "the customer is blocked", "false": "it can wait"}},
    "department": {"type": "choice", "instructions": "Which team should handle this?",
                   "criteria": {"billing": "payments and invoices", "technical": None, "sales": "new plans"}},
    "severity": {"type": "score", "criteria": ["trivial", None, "blocking"]},
}


@pytest.fixture(scope="module")
def served(default_model):
    s = open_served(CFG, default_model)
    yield s
    close_served(s)


def ask(served, payload):
    async def body(c, served):
        before = (await (await c.get("/health")).json())["scheduler"]["admitted"]
        r = await c.post("/v1/systemone", json=payload)
        after = (await (await c.get("/health")).json())["scheduler"]["admitted"]
        return r.status, dict(r.headers), await r.json(), after - before

    return run_app(served, body, CFG)


def test_prompts_are_the_notes_raw_text():
    req = parse_systemone({"state": {"a": 1}, "prefix": "You triage tickets.", "questions": QUESTIONS}, 1)
    question, options = prompts(req, req.questions[2])
    assert question == ('You triage tickets.\n\nContext:\n{\n  "a": 1\n}\n\nQuestion: Rate this on the scale below.\n'
                        'Scale:\n1: trivial\n2: level 1\n3: blocking\nAnswer with the number.\nAnswer:')
    assert options == [question + " 1", question + " 2", question + " 3"]
    noul_q, noul_opts = prompts(req, req.questions[0])
    assert "Question: Is this true?\nyes: the customer is blocked\nno: it can wait\nAnswer yes or no.\nAnswer:" \
        in noul_q and noul_opts[0].endswith("Answer: yes")
    choice_q, _ = prompts(parse_systemone({"state": "  x  ", "questions": {"d": QUESTIONS["department"]}}, 1),
                          req.questions[1])
    assert choice_q == ("Context:\nx\n\nQuestion: Which team should handle this?\nOptions:\n- billing: payments and "
                        "invoices\n- technical\n- sales: new plans\nAnswer with one of the options.\nAnswer:")


def test_confidence_entropy_softmax():
    assert confidence([1.0]) == 1.0 and confidence([0.5, 0.5]) == 0.0 and confidence([1.0, 0.0]) == 1.0
    assert entropy([0.25] * 4) == pytest.approx(1.0) and entropy([1.0, 0.0]) == 0.0
    assert softmax([0.0, math.log(3)]) == pytest.approx([0.25, 0.75])


def reference(served, texts: list[str], n_prefix: int) -> list[float]:
    """Each option's summed read-out log-prob, straight from the engine thread."""
    async def main():
        out = []
        for text in texts:
            req = GenRequest(slot=1, prompt=served.tokenize_completion(text), max_tokens=0, echo=True)
            fin = [ev async for ev in served.engine_thread.generate(req) if isinstance(ev, Finish)][0]
            out.append(sum(p.logprob for p in fin.prompt_readout[n_prefix:]))
        return out

    return asyncio.run(main())


def test_answers_are_the_engines_read_out(served):
    status, headers, reply, admitted = ask(served, {"model": "anything", "state": TICKET, "questions": QUESTIONS})
    assert status == 200, reply
    assert reply["id"].startswith("req_") and reply["model"] == "gemma-3-270m" and reply["provider"] == "colibri"
    assert list(reply["answers"]) == ["urgent", "department", "severity"]  # the request's order
    assert admitted == 1  # one admission for every question and option
    req = parse_systemone({"state": TICKET, "questions": QUESTIONS}, 2)
    for q in req.questions:
        question, options = prompts(req, q)
        n_prefix = len(served.tokenize_completion(question))
        probs = softmax(reference(served, options, n_prefix))
        got = reply["answers"][q.id]
        if q.type == "noul":
            assert got["noul"] == pytest.approx(probs[0], abs=2e-6) and "confidence" not in got
        else:
            assert list(got["probabilities"].values()) == pytest.approx(probs, abs=2e-6)
            assert got["confidence"] == pytest.approx(confidence(probs), abs=2e-6)
        assert got["entropy"] == pytest.approx(entropy(probs), abs=2e-6) and 0 <= got["entropy"] <= 1
    sev = reply["answers"]["severity"]
    assert list(sev["probabilities"]) == ["0", "1", "2"] and sev["legend"] == {"0": "trivial", "1": "level 1",
                                                                               "2": "blocking"}
    assert sev["score"] == pytest.approx(sum(i * p for i, p in enumerate(sev["probabilities"].values())), abs=1e-5)
    dep = reply["answers"]["department"]
    assert dep["choice"] == max(dep["probabilities"], key=dep["probabilities"].get)
    longest = max(len(served.tokenize_completion(o)) for q in req.questions for o in prompts(req, q)[1])
    assert reply["usage"]["input_tokens"] == longest and reply["usage"]["cost"] == 0
    for name in ("x-colibri-queue-wait-ms", "x-colibri-elapsed-ms", "x-colibri-prefill-tokens"):
        assert int(headers[name]) >= 0
    assert int(headers["x-colibri-engine-calls"]) == 2 + 3 + 3


def test_prefill_spent_is_measured(served):
    """What the engine prefilled across the options and took from the slot's cache: each option
    is read out from where its own tokens start (echo_from), so the shared prefix is reused."""
    status, headers, reply, _ = ask(served, {"state": TICKET, "questions": QUESTIONS})
    req = parse_systemone({"state": TICKET, "questions": QUESTIONS}, 2)
    calls = [served.tokenize_completion(o) for q in req.questions for o in prompts(req, q)[1]]
    total = sum(len(c) for c in calls)
    prefilled, reused = int(headers["x-colibri-prefill-tokens"]), int(headers["x-colibri-reused-tokens"])
    assert prefilled + reused == total and reused > 0
    shared = sum(common(a, b) for a, b in zip(calls, calls[1:]))  # each call's prefix the previous one cached
    print(f"\nSystem One, {len(calls)} option read-outs ({total} prompt tokens): {prefilled} prefilled, "
          f"{reused} reused; {shared} ({100 * shared / total:.0f}%) are a prefix of the call before")


def common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_mean_and_single_option(served):
    q = {"d": {"type": "choice", "criteria": {"a long answer with many words": None, "no": None}}}
    _, _, by_sum, _ = ask(served, {"state": TICKET, "questions": q})
    _, _, by_mean, _ = ask(served, {"state": TICKET, "questions": q, "normalize": "mean"})
    assert by_sum["answers"]["d"]["probabilities"] != by_mean["answers"]["d"]["probabilities"]
    _, headers, one, _ = ask(served, {"state": "", "questions": {"only": {"type": "choice", "criteria": {"x": None}}}})
    assert one["answers"]["only"] == {"type": "choice", "choice": "x", "probabilities": {"x": 1.0},
                                      "confidence": 1.0, "entropy": 0.0}
    assert headers["x-colibri-engine-calls"] == "0"


@pytest.mark.parametrize("payload, loc", [
    ({"questions": QUESTIONS}, ["body", "state"]),
    ({"state": 3, "questions": QUESTIONS}, ["body", "state"]),
    ({"state": "", "questions": {}}, ["body", "questions"]),
    ({"state": "", "questions": {f"q{i}": QUESTIONS["urgent"] for i in range(65)}}, ["body", "questions"]),
    ({"state": "", "questions": {"q": {"type": "rank"}}}, ["body", "questions", "q", "type"]),
    ({"state": "", "questions": {"q": {"type": "choice", "criteria": {}}}}, ["body", "questions", "q", "criteria"]),
    ({"state": "", "questions": {"q": {"type": "score", "criteria": ["a", 3]}}},
     ["body", "questions", "q", "criteria", 1]),
    ({"state": "", "questions": {"q": {"type": "noul", "criteria": {"maybe": "x"}}}},
     ["body", "questions", "q", "criteria"]),
    ({"state": "", "questions": QUESTIONS, "normalize": "max"}, ["body", "normalize"]),
    ({"state": "", "questions": QUESTIONS, "prefix": ""}, ["body", "prefix"]),
    ({"state": "", "questions": QUESTIONS, "cache_slot": 5}, ["body", "cache_slot"]),
    ({"state": "", "questions": QUESTIONS, "pin_state": "yes"}, ["body", "pin_state"]),
])
def test_validation_errors_are_422_with_their_location(served, payload, loc):
    status, _, reply, admitted = ask(served, payload)
    assert status == 422 and admitted == 0
    assert reply["detail"][0]["loc"] == loc and reply["detail"][0]["type"] == "value_error"
    assert reply["error"]["param"] and reply["error"]["message"] == reply["detail"][0]["msg"]


def test_invalid_is_a_422():
    assert Invalid("questions.q.criteria[2]", "x").body()["detail"][0]["loc"] == ["body", "questions", "q", "criteria", 2]
