"""Checks every family with slots must pass, shared by the family test files:
conversations decoded together equal each decoded alone, and a saved slot
restores and continues as the live one would have."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from colibri.engine import Engine
from tests.reference import arithmetic_mirrored, matches_llama_cpp, top1_where_decided


def run_slot(e: Engine, slot: int, prompt: list[int], n: int) -> tuple[list[int], int]:
    """Submit `prompt` to `slot`, step until it is done: (its n generated tokens, prompt tokens reused)."""
    reused = e.submit(slot, prompt, max_tokens=n, ignore_eos=True)
    out: list[int] = []
    while True:
        evs = e.step()
        out += [ev.token for ev in evs if not ev.done]
        if any(ev.done for ev in evs):
            return out, reused


def assert_batched_slots_equal_alone(path: Path) -> None:
    """Four conversations (some past a sliding window), decoded together and joining at
    different steps, give each the tokens it decodes alone."""
    lengths, max_new = [40, 70, 12, 50], [20, 16, 30, 12]
    with Engine(path, n_slots=4, n_ctx=160, n_batch=16, n_threads=2) as e:
        rng = np.random.default_rng(7)
        prompts = [[e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, k)] for k in lengths]
        alone = [run_slot(e, i, p, m)[0] for i, (p, m) in enumerate(zip(prompts, max_new))]
    with Engine(path, n_slots=4, n_ctx=160, n_batch=16, n_threads=2) as e:
        got: dict[int, list[int]] = {i: [] for i in range(4)}
        done: set[int] = set()
        joins = {0: [0], 3: [1, 2], 6: [3]}
        for step in range(300):
            for i in joins.get(step, []):
                e.submit(i, prompts[i], max_tokens=max_new[i], ignore_eos=True)
            for ev in e.step():
                if ev.done:
                    done.add(ev.slot)
                else:
                    got[ev.slot].append(ev.token)
            if len(done) == 4:
                break
    assert [got[i] for i in range(4)] == alone


def assert_saved_slot_continues(path: Path, tmp_path: Path) -> None:
    """A 71-token prompt (past a tiny model's window) saved, loaded into a fresh engine and
    continued, reuses the whole prompt and generates what the live slot did."""
    prompt = [1] + list(range(20, 90))
    with Engine(path, n_slots=1, n_ctx=256, n_threads=2) as e:
        e.submit(0, prompt, max_tokens=0)
        while e.step():
            pass
        e.slot_save(0, tmp_path / "slot.kv")
        want, _ = run_slot(e, 0, prompt + [7], 16)
    with Engine(path, n_slots=1, n_ctx=256, n_threads=2) as e:
        assert e.slot_load(0, tmp_path / "slot.kv") == len(prompt)
        got, reused = run_slot(e, 0, prompt + [7], 16)
    assert reused == len(prompt) and got == want


def random_tokens(e: Engine, n: int, seed: int = 5) -> list[int]:
    """BOS and n - 1 random ids of the model's vocabulary."""
    rng = np.random.default_rng(seed)
    return [e.bos] + [int(t) for t in rng.integers(0, e.n_vocab, n - 1)]


def all_logits(e: Engine, tokens: list[int]) -> np.ndarray:
    return np.frombuffer(e.eval(tokens, 0, logits="all"), np.float32).reshape(len(tokens), -1)


def assert_fidelity(path: Path, positions: int, label: str, n_greedy: int = 32) -> None:
    """matches_llama_cpp's checks (ours in batches of 128, llama.cpp's of 512; top-1 >= 99.5 %
    on clear positions, mean KL < 1e-4, n_greedy greedy tokens equal), and the same bits when both
    split the prompt alike, where our kernels mirror ggml's."""
    ours, theirs = matches_llama_cpp(path, positions, label, n_greedy=n_greedy)
    agree, decided = top1_where_decided(ours, theirs)
    with Engine(path, n_ctx=positions + 64, n_threads=2, n_batch=512) as e:  # llama.cpp's batches
        alike = all_logits(e, random_tokens(e, positions))
    dmax, dsame = float(np.abs(ours - theirs).max()), float(np.abs(alike - theirs).max())
    print(f"FIDELITY {label}: top-1 {agree}/{decided} = {agree / decided:.4f} on clear positions, "
          f"max |dlogit| {dmax:.3g} (batches of 128 against 512), {dsame:.3g} (the same batches), greedy equal")
    if arithmetic_mirrored():
        assert dsame == 0.0


def renamed_tensor(src: Path, dst: Path, name: str, new: str) -> Path:
    """A copy of GGUF file src with tensor `name` renamed to `new` (same length): a file that lacks it."""
    raw = bytearray(src.read_bytes())
    i = raw.find(struct.pack("<Q", len(name)) + name.encode())
    assert i >= 0 and len(new) == len(name), name
    raw[i + 8: i + 8 + len(name)] = new.encode()
    dst.write_bytes(bytes(raw))
    return dst


def patched_u32(src: Path, dst: Path, key: str, value: int) -> Path:
    """A copy of GGUF file src with the u32 metadata value of `key` set to `value`."""
    raw = bytearray(src.read_bytes())
    k = key.encode()
    i = raw.find(struct.pack("<Q", len(k)) + k)
    assert i >= 0, key
    at = i + 8 + len(k)
    assert struct.unpack_from("<I", raw, at)[0] == 4  # GGUF u32
    struct.pack_into("<I", raw, at + 4, value)
    dst.write_bytes(bytes(raw))
    return dst
