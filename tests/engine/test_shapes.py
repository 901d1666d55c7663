"""Every family the engine runs, in every tensor type it reads, on the shapes
real files have (tests/fixtures/shaped_models.py: GQA groups of 5, 6 and 7,
head counts that are not powers of two, rows of odd block and super-block
counts with llama-quantize's fallback types, attention biases of real size,
tied and untied heads, a vocabulary of 151,936), against llama.cpp on the same
file: the same bits where our kernels mirror its arithmetic, else the same
top-1 at every position and a KL at the rounding floor.

Each (family, type) pair gets one of the three GQA shapes in turn, so every
family meets every shape and every type meets every shape; the vocabulary
shapes run once per family (olmoe always has its own LM head)."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine
from tests.fixtures.shaped_models import FAMILIES, SHAPES, TYPES, file_types, shaped
from tests.reference import arithmetic_mirrored, compare_logits, load_reference, top1_where_decided

pytest.importorskip("gguf")

GQA_SHAPES = ("gqa7", "gqa6", "gqa5")
VOCAB_TYPES = ("Q8_0", "Q4_K", "Q6_K", "Q4_K", "F16", "Q4_0", "Q5_K", "Q6_K")  # tied for every other family
# types whose kernels add up as the reference's (tests/engine/test_matmul.py)
MIRRORED = {"F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"}
# the others (BF16, Q2_K, Q3_K) agree to float rounding in every matmul; random
# weights carry that to ~1e-5 nats, and can flip a near-tie
KL_MEAN_MAX, GAP = 1e-4, 0.05
N_TOKENS = 40

CASES = [(f, t, GQA_SHAPES[(i + j) % len(GQA_SHAPES)]) for i, f in enumerate(FAMILIES) for j, t in enumerate(TYPES)]
CASES += [(f, VOCAB_TYPES[i % len(VOCAB_TYPES)], ("vocab", "vocab-tied")[i % 2]) for i, f in enumerate(FAMILIES)]


@pytest.fixture(scope="module")
def mirrored():
    return arithmetic_mirrored()


@pytest.mark.parametrize("family,quant,shape", CASES, ids=[f"{f}-{t}-{s}" for f, t, s in CASES])
@pytest.mark.isa_bits
def test_shaped_model_matches_llama_cpp(mirrored, family, quant, shape):
    sh = SHAPES[shape]
    path = shaped(family, quant, shape, seed=7)
    rng = np.random.default_rng(11)
    with Engine(path, n_ctx=64, n_threads=2) as e:
        # ids from the whole vocabulary (the padded rows of the big one too)
        tokens = [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, N_TOKENS - 1)]
        ours = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
        n_vocab = e.n_vocab
    assert n_vocab >= sh.n_vocab
    ref = load_reference(path, n_ctx=64)
    ref.eval(tokens)
    theirs = np.asarray(ref.scores[: len(tokens)], dtype=np.float32)
    types = file_types(quant, sh, family)
    if mirrored and types <= MIRRORED:
        bad = int((ours != theirs).any(axis=-1).sum())
        assert bad == 0, f"{bad} of {len(tokens)} rows differ from llama.cpp's bits ({sorted(types)})"
        return
    kl, _ = compare_logits(ours, theirs, f"{family} {quant} {shape}")
    agree, decided = top1_where_decided(ours, theirs, GAP)
    assert kl.mean() < KL_MEAN_MAX
    assert agree == decided, f"top-1 differs at {decided - agree} of {decided} positions llama.cpp decides by >= {GAP}"
