"""The files people download (issue 19): MoE models whose routed experts are
low-bit types (IQ1_S ... IQ4_XS, TQ1_0, TQ2_0, MXFP4, Q2_K, Q3_K), alone or
mixed as Unsloth's dynamic quants, Kimi K2's IQ3_XXS and gpt-oss mix them,
against llama.cpp on the same file (tests/fixtures/moe_models.py: lowbit(),
mixed(); written by llama.cpp's own quantizer). Per file: 600 positions
teacher-forced (top-1 >= 99.5 % where llama.cpp's top-2 are >= 0.05 apart, mean
KL < 1e-4, and the same bits where our kernels mirror ggml's for every type in
the file), and 32 greedy tokens identical.

A file with a type whose kernels are not merged yet is skipped, naming the
type (the engine refuses such a file by name: "unsupported: tensor ... has type
IQ2_XXS, which colibri cannot compute with yet"). test_streaming.py and
test_slots.py run some of these files too (require_kernels)."""
from __future__ import annotations

import numpy as np
import pytest

from colibri.engine import Engine, GGUFFile
from colibri.errors import EngineError
from tests.fixtures import moe_models as mm
from tests.reference import arithmetic_mirrored, matches_llama_cpp, top1_where_decided

pytest.importorskip("gguf")

POSITIONS = 600  # teacher-forced, one sequence
KINDS = [f"exp:{t}" for t in mm.LOWBIT_TYPES] + [f"mix:{m}" for m in mm.MIXES]

# Types whose kernels give ggml's bits on every path a model takes (one row, batches,
# experts through mul_mat_id; tests/engine/test_matmul.py and test_quant_{ternary,iq23,iq14}.py
# check each kernel): on a file using only these, our logits equal llama.cpp's where
# arithmetic_mirrored(). Every low-bit type since the lowk, iq23 and iq14 kernels.
MIRRORED = {"F32", "F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"} | set(mm.LOWBIT_TYPES)


def fixture(kind: str):
    """The file of a kind: "exp:<type>" (mm.lowbit) or "mix:<name>" (mm.mixed)."""
    what, _, name = kind.partition(":")
    return mm.lowbit(name) if what == "exp" else mm.mixed(name)


def require_kernels(path) -> dict[str, int]:
    """Skip while colibri cannot compute with one of the file's types (its kernels
    are not merged yet), naming them; else the file's {type: tensor count}."""
    with GGUFFile(path) as g:
        info = g.describe()
    missing = sorted(t for t, ok in info["tensor_computes"].items() if not ok)
    if missing:
        try:  # the refusal is the engine's own, by name
            Engine(path, n_ctx=32, n_threads=1).close()
        except EngineError as e:
            assert e.code == "unsupported" and "cannot compute with yet" in str(e), str(e)
        pytest.skip(f"colibri cannot compute with {', '.join(missing)} yet (its kernels are not merged)")
    return info["tensor_types"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.isa_bits
def test_matches_llama_cpp(kind):
    """matches_llama_cpp's checks; where every type is mirrored, the same bits as
    llama.cpp when both split the prompt alike. (matches_llama_cpp runs ours in
    batches of 128 against llama.cpp's of 512, and llama.cpp's own logits depend
    on that split, as the rows each expert gets decide its arithmetic (e.g. under
    8 rows ggml's vec_dot, from 8 its tiled matmul). On the UD-like file that
    moves a few logits by an ulp, in llama.cpp against itself as in ours against it.)"""
    path = fixture(kind)
    types = require_kernels(path)
    ours, theirs = matches_llama_cpp(path, POSITIONS, kind)
    agree, decided = top1_where_decided(ours, theirs)
    dmax = float(np.abs(ours - theirs).max())
    with Engine(path, n_ctx=POSITIONS + 64, n_threads=2, n_batch=512) as e:  # llama.cpp's batches: 512, then 88
        rng = np.random.default_rng(5)  # matches_llama_cpp's tokens
        tokens = [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, POSITIONS - 1)]
        alike = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
    dsame = float(np.abs(alike - theirs).max())
    mirrored = set(types) <= MIRRORED and arithmetic_mirrored()
    print(f"FIDELITY {kind}: top-1 {agree}/{decided} = {agree / decided:.4f} on clear positions, max |dlogit| "
          f"{dmax:.3g} (batches of 128 against 512), {dsame:.3g} (the same batches), greedy equal, "
          f"types {sorted(types)}{' (mirrored)' if mirrored else ''}")
    if mirrored:  # the same bits
        assert dsame == 0.0


def test_every_low_bit_type_has_a_fixture():
    assert {mm.lowbit_config(t).expert_type for t in mm.LOWBIT_TYPES} == set(mm.LOWBIT_TYPES)
    mixed = {t for m in mm.MIXES for t in mm.mixed_config(m).types()}
    assert {"IQ2_XXS", "IQ3_XXS", "IQ4_XS", "MXFP4", "Q4_K", "Q6_K", "Q8_0", "F16"} <= mixed
