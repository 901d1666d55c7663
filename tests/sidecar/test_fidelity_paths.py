"""The real models through the user's two ways in, against llama.cpp on the same
file: `coli generate` (a child process) and a `coli serve` slot (a real server:
the engine thread, batched slot steps, chunked prefill), at 1 and 2 threads.
tests/engine/test_fidelity.py covers Engine.eval; these catch a path that sets
the engine up differently (threads, context, batch, rows mode)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import run_coli
from tests.reference import assert_same_greedy, greedy_with_margins, llama_cpp, load_reference, log_softmax
from tests.sidecar.serve_support import ServerProcess

# A slot prefills every prompt row with one arithmetic, the batch kernels', so
# that a prompt continued over a cached prefix equals it prefilled whole.
# llama.cpp's single batch does so only for whole groups of 4 rows (its
# repacked gemm; the rest go through gemv) and from 8 rows (its tiled K-quant
# matmul), so the prompts here are cut to a multiple of 4 tokens, >= 8; other
# lengths differ by rounding (e.g. 0.06 in a log-prob of Qwen2.5 0.5B at 7 tokens).
TEXT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number, computed iteratively so that it runs in linear time."""\n'
N = 32
NEAR_TIE = 0.01
THREADS = ("1", "2")
LOGPROB_TOL = 2e-4  # ours are f32 log-softmaxes, llama.cpp's recomputed here in f64


@pytest.fixture(scope="module")
def ref(real_model):
    return load_reference(real_model[1], n_ctx=256)


@pytest.fixture(scope="module")
def ref_greedy(ref):
    """A prefix of TEXT, and llama.cpp's greedy continuation of it (cut at its first end-of-generation
    token: the server stops there), with margins and the prompt's log-probs."""
    words = TEXT.split(" ")
    for i in range(len(words), 0, -1):
        text = " ".join(words[:i])
        prompt = ref.tokenize(text.encode(), add_bos=True)
        if len(prompt) % 4 == 0 and len(prompt) >= 8:
            break
    else:
        raise AssertionError("no prefix of TEXT has a multiple of 4 tokens")
    tokens, margins = greedy_with_margins(ref, prompt, N)
    ref.reset()
    ref.eval(prompt)
    lp = log_softmax(np.asarray(ref.scores[: len(prompt)], dtype=np.float32))
    prompt_lp = [float(lp[i - 1, prompt[i]]) for i in range(1, len(prompt))]
    mod = llama_cpp()
    vocab = mod.llama_model_get_vocab(ref.model)
    eog = next((k for k, t in enumerate(tokens) if mod.llama_vocab_is_eog(vocab, t)), len(tokens))
    return text, prompt, tokens, margins, eog, prompt_lp


def same_or_near_tie(ours: list[int], theirs: list[int], margins: list[float]) -> None:
    assert_same_greedy(ours, theirs[: len(ours)], margins, NEAR_TIE)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.isa_bits
def test_coli_generate_matches_llama_cpp(real_model, ref_greedy, threads):
    _, path = real_model
    text, prompt, theirs, margins, _, _ = ref_greedy
    r = run_coli("generate", "--model", str(path), "-p", text, "-n", str(N), "--json", "--ignore-eos",
                 "--ctx", "256", "--threads", threads, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["prompt_tokens"] == prompt
    assert len(out["tokens"]) == N
    same_or_near_tie(out["tokens"], theirs, margins)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.isa_bits
def test_serve_slot_matches_llama_cpp(real_model, ref, ref_greedy, threads):
    _, path = real_model
    text, prompt, theirs, margins, eog, prompt_lp = ref_greedy
    with ServerProcess(["--model", str(path), "--model-id", "m", "--threads", threads, "--ctx", "256",
                        "--kv-slots", "2"], timeout=300) as srv:
        status, _, body = srv.post("/v1/completions", {"model": "m", "prompt": text, "max_tokens": N,
                                                       "temperature": 0, "echo": True, "logprobs": 1})
    assert status == 200, body
    choice = body["choices"][0]
    assert body["usage"]["prompt_tokens"] == len(prompt)
    # the prompt's teacher-forced log-probs, position by position (the first has none)
    ours_lp = choice["logprobs"]["token_logprobs"][: len(prompt)]
    assert ours_lp[0] is None
    assert np.allclose(ours_lp[1:], prompt_lp, atol=LOGPROB_TOL, rtol=0), (ours_lp[1:8], prompt_lp[:7])
    # the continuation: the same text as llama.cpp's greedy tokens (up to where it ends)
    completion = choice["text"][len(text):]
    expected = ref.detokenize(theirs[:eog]).decode("utf-8", errors="replace")
    if completion != expected:  # excused only after a near-tie of llama.cpp's own
        upto = lambda n: ref.detokenize(theirs[:n]).decode("utf-8", errors="replace")  # noqa: E731
        k = next(i for i in range(eog) if not completion.startswith(upto(i + 1)))
        assert margins[k] < NEAR_TIE, (f"diverged at step {k} where llama.cpp's top-2 margin is {margins[k]:.4f}: "
                                       f"{completion!r} vs {expected!r}")
        return
    assert choice["finish_reason"] == ("length" if eog >= N else "stop")
