"""engine/src/model.c and forward.c on tiny synthetic models: loading, bad
input as named errors (a tensor type colibri cannot compute with, or one no
ggml knows, names the type and the tensor), prefill equal to decode, the
context limit."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from colibri.commands.models import format_info
from colibri.engine import Engine, GGUFFile
from colibri.errors import EngineError
from tests.engine.tiny_models import write_tiny_gemma3
from tests.fixtures import moe_models

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return write_tiny_gemma3(tmp_path_factory.mktemp("tiny") / "tiny.gguf")


def test_tiny_model_loads_and_reports(tiny):
    with Engine(tiny, n_ctx=64, n_threads=2) as e:
        info = e.model_info()
        assert info["arch"] == "gemma3" and info["n_ctx"] == 64 and info["n_threads"] == 2
        assert info["vocab_only"] is False and info["kv_bytes_per_slot"] > 0
        assert e.n_vocab == 260


def test_batching_follows_llama_cpp_and_threads_agree(tiny):
    """Like llama.cpp's CPU backend, a batch of tokens adds up its dot products as
    the batched kernels do (tinyBLAS, tiled, repacked gemm) and a single token as
    ggml_vec_dot does (quant.h): a prompt split into batches of 8 gives the bits
    of one batch of 16, one token at a time differs by rounding only, and the
    thread count never changes a bit."""
    tokens = [258, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33, 10, 65, 66]
    with Engine(tiny, n_ctx=64, n_threads=2, n_batch=8) as e:
        batch = np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
        assert np.isfinite(batch).all()
        one = np.stack([np.frombuffer(e.eval([t], i, logits="last"), np.float32) for i, t in enumerate(tokens)])
    with Engine(tiny, n_ctx=64, n_threads=1) as e1:
        single = np.frombuffer(e1.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)
    assert np.array_equal(batch, single), "batches of 8 on 2 threads differ from one batch of 16 on 1 thread"
    np.testing.assert_allclose(one, single, rtol=1e-4, atol=1e-4 * float(np.abs(single).max()))


def test_sliding_window_limits_attention(tiny):
    """With a 4-token window, the last position's logits ignore tokens 5+ back in SWA layers,
    but layer 1 (global: pattern 6 makes layers 0..4 sliding, 5 global) is sliding too here,
    so changing the first token must not change the logits of position 9."""
    a = [258, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    b = [258, 99, 11, 12, 13, 14, 15, 16, 17, 18]
    with Engine(tiny, n_ctx=32, n_threads=1) as e:
        la = np.frombuffer(e.eval(a, 0, logits="all"), np.float32).reshape(len(a), -1)
        lb = np.frombuffer(e.eval(b, 0, logits="all"), np.float32).reshape(len(b), -1)
    assert not np.array_equal(la[2], lb[2])  # inside the window: the change is seen
    # both layers slide (window 4), so after two layers the receptive field is 2*(4-1)=6 back
    assert np.array_equal(la[9], lb[9])


def test_context_limit_is_named(tiny):
    with Engine(tiny, n_ctx=16, n_threads=1) as e:
        with pytest.raises(EngineError) as err:
            e.eval(list(range(17)), 0)
        assert err.value.code == "too_long" and "context holds 16" in str(err.value)
        with pytest.raises(EngineError) as err:
            e.eval([5000], 0)
        assert err.value.code == "invalid_argument" and "outside the vocabulary" in str(err.value)


def test_vocab_only_engine_refuses_eval(tiny):
    with Engine(tiny, vocab_only=True) as e:
        assert e.tokenize("hi")
        with pytest.raises(EngineError) as err:
            e.eval([1], 0)
        assert err.value.code == "bad_state"


@pytest.mark.parametrize("kwargs,code,fragment", [
    ({"arch": "mamba"}, "unsupported", "architecture 'mamba'"),
    ({"drop": "blk.1.ffn_up.weight"}, "missing", "blk.1.ffn_up.weight"),
    ({"drop": "blk.0.attn_q_norm.weight"}, "missing", "attn_q_norm"),
    ({"drop": "output_norm.weight"}, "missing", "output_norm"),
    ({"reshape": {"blk.0.attn_q.weight": (96, 64)}}, "corrupt", "expected [64, 64]"),
    ({"reshape": {"blk.1.ffn_down.weight": (64, 100)}}, "corrupt", "blk.1.ffn_down.weight"),
    ({"raw_types": {"blk.0.ffn_gate.weight": 40}}, "unsupported", "tensor 'blk.0.ffn_gate.weight' has type NVFP4"),
    ({"raw_types": {"blk.1.ffn_down.weight": 41}}, "unsupported", "tensor 'blk.1.ffn_down.weight' has type Q1_0"),
])
def test_bad_model_is_a_named_error(tmp_path, kwargs, code, fragment):
    path = write_tiny_gemma3(tmp_path / "bad.gguf", **kwargs)
    with pytest.raises(EngineError) as err:
        Engine(path, n_ctx=32)
    assert err.value.code == code, str(err.value)
    assert fragment in str(err.value)


# ---- tensor types colibri cannot compute with ----------------------------------

EXPERTS = "blk.0.ffn_gate_exps.weight"  # [128, 64, 8] Q8_0 in the tiny qwen3moe: 128 is whole blocks of every type


def _retyped(src, dst, tensor: str, type_id: int):
    """A copy of src whose tensor info for `tensor` declares ggml type type_id (the
    bytes are left as they are: a type of fewer bytes per row still fits the file)."""
    raw = bytearray(src.read_bytes())
    name = tensor.encode()
    i = raw.find(struct.pack("<Q", len(name)) + name)
    assert i >= 0, tensor
    at = i + 8 + len(name)
    n_dims = struct.unpack_from("<I", raw, at)[0]
    struct.pack_into("<I", raw, at + 4 + 8 * n_dims, type_id)
    dst.write_bytes(bytes(raw))
    return dst


@pytest.mark.parametrize("type_id,name", [(40, "NVFP4"), (41, "Q1_0"), (42, "Q2_0")])
def test_newer_ggml_types_are_named_and_refused(tmp_path, type_id, name):
    """ggml 0.3.36's types past MXFP4 (gguf-py does not even know Q2_0): the reader
    sizes and names them, `coli models info` lists them as not computable, and
    loading is an "unsupported" error naming the type and the tensor."""
    path = _retyped(moe_models.tiny("qwen3moe", "Q8_0"), tmp_path / "new.gguf", EXPERTS, type_id)
    with GGUFFile(path) as g:
        info = g.describe()
        assert {t.name: t.type for t in g.tensors()}[EXPERTS] == name
    assert info["tensor_types"][name] == 1 and info["tensor_computes"] == {"F32": True, "Q8_0": True, name: False}
    info["path"] = str(path)
    line = next(ln for ln in format_info(info).splitlines() if ln.split()[0] == name)
    assert "cannot compute with it yet" in line
    assert "Q8_0" in format_info(info) and "yes" in next(ln for ln in format_info(info).splitlines()
                                                          if ln.split()[0] == "Q8_0")
    with pytest.raises(EngineError) as err:
        Engine(path, n_ctx=32)
    assert err.value.code == "unsupported"
    assert f"tensor '{EXPERTS}' has type {name}, which colibri cannot compute with yet" in str(err.value)


@pytest.mark.parametrize("type_id", [99, 43, 36, 4, 2**32 - 1])
def test_unknown_type_ids_are_a_named_corrupt_file(tmp_path, type_id):
    """An id no ggml type has (past ggml's count, or retired: 4 was Q4_2, 36 IQ4_NL_4_4)
    is refused by the GGUF reader, naming the tensor and the id, before any model code."""
    path = _retyped(moe_models.tiny("qwen3moe", "Q8_0"), tmp_path / "bad.gguf", EXPERTS, type_id)
    for open_it in (lambda: GGUFFile(path), lambda: Engine(path, n_ctx=32)):
        with pytest.raises(EngineError) as err:
            open_it()
        assert err.value.code == "corrupt"
        assert f"tensor '{EXPERTS}' has ggml type id {type_id}, which names no ggml type" in str(err.value)


def test_every_type_id_loads_or_is_a_named_error(tmp_path):
    """Whatever type id the routed experts declare, opening the model gives an engine
    or an error naming the id or the type, never a crash (run in this process)."""
    src = moe_models.tiny("qwen3moe", "Q8_0")
    outcomes = {}
    for type_id in range(0, 48):
        path = _retyped(src, tmp_path / f"t{type_id}.gguf", EXPERTS, type_id)
        try:
            with Engine(path, n_ctx=32, n_threads=1):
                outcomes[type_id] = "loads"
        except EngineError as e:
            assert e.code in ("corrupt", "unsupported", "truncated"), str(e)
            assert f"type id {type_id}" in str(e) or EXPERTS in str(e), str(e)
            outcomes[type_id] = e.code
    assert outcomes[8] == "loads"  # the file as written
    assert outcomes[40] == outcomes[41] == outcomes[42] == "unsupported"
    assert all(outcomes[t] == "corrupt" for t in (4, 5, 31, 32, 33, 36, 37, 38, 43, 47))
