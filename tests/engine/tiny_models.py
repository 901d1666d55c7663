"""Tiny synthetic dense models written with the `gguf` package, for load and
bad-input tests (random weights; the real model is the default Gemma 3)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.engine.tokenizer_fixtures import bpe_vocab, train_bpe

E, H, HKV, D, F, L = 64, 2, 1, 32, 128, 2


FAMILIES = ("gemma3", "llama", "qwen2", "qwen3")
MOE_FAMILIES = ("qwen3moe", "olmoe", "mixtral", "glm4moe")
N_EXPERT, N_EXPERT_USED, F_EXP = 8, 2, 32


def write_tiny_gemma3(path: Path, **kw) -> Path:
    return write_tiny(path, family="gemma3", **kw)


def write_tiny(path: Path, *, family: str = "gemma3", arch: str | None = None, drop: str | None = None,
               reshape: dict[str, tuple[int, ...]] | None = None, raw_types: dict[str, int] | None = None,
               extra_kv: dict | None = None, quant: int | None = None, tied: bool | None = None, seed: int = 0,
               declare_experts: int | None = None, declare_used: int | None = None) -> Path:
    """A 2-layer model laid out as llama.cpp expects `family`; `drop` leaves a tensor
    out, `reshape` changes a tensor's shape, `raw_types` writes a tensor as another
    ggml type (zero bytes), `quant` stores the matrices in that ggml type; `tied` (no output
    matrix) defaults to what llama.cpp allows the family (OLMoE's output is required)."""
    import gguf

    rng = np.random.default_rng(seed)
    moe = family in MOE_FAMILIES
    if tied is None:
        tied = family != "olmoe"
    arch = arch or ("llama" if family == "mixtral" else family)
    merges = train_bpe("hello hello world", 2)
    tokens, types = bpe_vocab(merges, ["<bos>", "<eos>"])
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(L)
    w.add_context_length(1024)
    w.add_embedding_length(E)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    hkv = H if family == "olmoe" else HKV  # OLMoE has as many KV heads as heads
    w.add_head_count_kv(hkv)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    if family == "gemma3":
        w.add_sliding_window(4)
    if moe:
        w.add_expert_count(declare_experts or N_EXPERT)
        w.add_expert_used_count(declare_used or N_EXPERT_USED)
        if family not in ("mixtral", "olmoe"):
            w.add_expert_feed_forward_length(F_EXP)
        if family == "glm4moe":  # one dense lead layer, a shared expert, sigmoid gating with a bias
            w.add_leading_dense_block_count(1)
            w.add_expert_shared_count(1)
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
            w.add_expert_weights_norm(True)
            w.add_expert_weights_scale(2.5)
            w.add_rope_dimension_count(D // 2)  # partial rotary
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(len(tokens) - 2)
    w.add_eos_token_id(len(tokens) - 1)
    w.add_add_bos_token(True)
    for key, value in (extra_kv or {}).items():
        w.add_key_value(key, value, gguf.GGUFValueType.UINT32)
    V = len(tokens)

    def mat(n_out, n_in, scale=0.2):
        return (rng.standard_normal((n_out, n_in)) * scale / np.sqrt(n_in)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    tensors = {"token_embd.weight": mat(V, E, 1.0), "output_norm.weight": norm(E)}
    for il in range(L):
        b = f"blk.{il}."
        tensors.update({
            b + "attn_norm.weight": norm(E), b + "attn_q.weight": mat(H * D, E), b + "attn_k.weight": mat(hkv * D, E),
            b + "attn_v.weight": mat(hkv * D, E), b + "attn_output.weight": mat(E, H * D),
            b + "ffn_norm.weight": norm(E),
        })
        dense_lead = family == "glm4moe" and il == 0
        if family == "glm4moe":  # GLM names the FFN's input norm post_attention_norm
            tensors[b + "post_attention_norm.weight"] = tensors.pop(b + "ffn_norm.weight")
            tensors.update({b + "attn_q.bias": 0.1 * norm(H * D), b + "attn_k.bias": 0.1 * norm(HKV * D),
                            b + "attn_v.bias": 0.1 * norm(HKV * D)})
        if family == "glm4moe" and not dense_lead:
            tensors.update({
                b + "exp_probs_b.bias": (0.05 * rng.standard_normal(N_EXPERT)).astype(np.float32),
                b + "ffn_gate_shexp.weight": mat(F_EXP, E), b + "ffn_up_shexp.weight": mat(F_EXP, E),
                b + "ffn_down_shexp.weight": mat(E, F_EXP),
            })
        if moe and not dense_lead:
            fe = F if family in ("mixtral", "olmoe") else F_EXP
            tensors.update({
                b + "ffn_gate_inp.weight": mat(N_EXPERT, E, 4.0),
                b + "ffn_gate_exps.weight": np.stack([mat(fe, E) for _ in range(N_EXPERT)]),
                b + "ffn_up_exps.weight": np.stack([mat(fe, E) for _ in range(N_EXPERT)]),
                b + "ffn_down_exps.weight": np.stack([mat(E, fe) for _ in range(N_EXPERT)]),
            })
        else:
            tensors.update({b + "ffn_gate.weight": mat(F, E), b + "ffn_up.weight": mat(F, E),
                            b + "ffn_down.weight": mat(E, F)})
        if family in ("gemma3", "qwen3", "qwen3moe"):
            tensors.update({b + "attn_q_norm.weight": norm(D), b + "attn_k_norm.weight": norm(D)})
        if family == "olmoe":
            tensors.update({b + "attn_q_norm.weight": norm(H * D), b + "attn_k_norm.weight": norm(hkv * D)})
        if family == "gemma3":
            tensors.update({b + "post_attention_norm.weight": norm(E), b + "post_ffw_norm.weight": norm(E)})
        if family == "qwen2":
            tensors.update({b + "attn_q.bias": 0.1 * norm(H * D), b + "attn_k.bias": 0.1 * norm(HKV * D),
                            b + "attn_v.bias": 0.1 * norm(HKV * D)})
    if not tied:
        tensors["output.weight"] = mat(V, E, 1.0)
    for name, arr in tensors.items():
        if name == drop:
            continue
        if reshape and name in reshape:
            arr = np.resize(arr, reshape[name]).astype(np.float32)
        if raw_types and name in raw_types:
            t = gguf.GGMLQuantizationType(raw_types[name])
            block, size = gguf.GGML_QUANT_SIZES[t]
            n_out, n_in = arr.shape
            raw = np.zeros((n_out, n_in // block * size), dtype=np.uint8)
            w.add_tensor(name, raw, raw_dtype=t)
        elif quant is not None and arr.ndim >= 2 and "gate_inp" not in name:
            t = gguf.GGMLQuantizationType(quant)
            w.add_tensor(name, gguf.quants.quantize(arr, t), raw_dtype=t)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
