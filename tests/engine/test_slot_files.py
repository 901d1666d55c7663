"""Persisted KV slots: a saved conversation continues after a restart with the
tokens it would have produced without one; missing, truncated, corrupt,
foreign and other-model files are refused by name and leave the slot empty;
a process killed at random moments while saving never leaves a file that
loads wrong."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from colibri.engine import Engine
from colibri.errors import EngineError
from tests.engine.family_checks import run_slot
from tests.fixtures import moe_models

pytest.importorskip("gguf")


def test_saved_slot_continues_after_restart(tmp_path, default_model):
    path = tmp_path / "slot-1.kv"
    with Engine(default_model, n_slots=2, n_ctx=128, n_threads=2) as e:
        first = e.tokenize("A short story about a lighthouse keeper:")
        out, _ = run_slot(e, 1, first, 8)
        history = e.slot_tokens(1)
        e.slot_save(1, path)
        follow = history + [out[-1]] + e.tokenize(" Then", add_bos=False)
        live, reused_live = run_slot(e, 1, follow, 6)
        model_id = e.model_id
    with Engine(default_model, n_slots=2, n_ctx=128, n_threads=2) as e:
        assert e.model_id == model_id
        assert e.slot_load(1, path) == len(history)
        assert e.slot_tokens(1) == history and e.slot_tokens(0) == []
        restored, reused = run_slot(e, 1, follow, 6)
    assert reused == reused_live == len(history)
    assert restored == live


def damaged(tmp_path: Path, good: bytes) -> dict[str, tuple[bytes, str]]:
    flip = bytearray(good)
    flip[len(flip) // 2] ^= 0x40
    header = bytearray(good)
    header[20] ^= 1
    return {
        "empty": (b"", "truncated"),
        "truncated": (good[: len(good) - 100], "truncated"),
        "short header": (good[:30], "truncated"),
        "flipped payload": (bytes(flip), "corrupt"),
        "flipped header": (bytes(header), "corrupt"),
        "foreign": (os.urandom(4096), "not_gguf"),
        "longer": (good + b"\0" * 8, "corrupt"),
    }


def test_bad_files_are_refused_and_leave_the_slot_empty(tmp_path, default_model):
    with Engine(default_model, n_slots=1, n_ctx=64, n_threads=2) as e:
        run_slot(e, 0, e.tokenize("Hello there"), 3)
        good_path = tmp_path / "good.kv"
        e.slot_save(0, good_path)
        good = good_path.read_bytes()
        for name, (data, code) in damaged(tmp_path, good).items():
            p = tmp_path / f"{name}.kv"
            p.write_bytes(data)
            with pytest.raises(EngineError) as err:
                e.slot_load(0, p)
            assert err.value.code == code, name
            assert e.slot_tokens(0) == [], name
        with pytest.raises(EngineError) as err:
            e.slot_load(0, tmp_path / "absent.kv")
        assert err.value.code == "missing"
        with pytest.raises(EngineError):
            e.slot_load(0, tmp_path)  # a directory
        assert e.slot_load(0, good_path) > 0
    # another model's file
    with Engine(moe_models.tiny("qwen3moe", "Q8_0"), n_slots=1, n_ctx=64, n_threads=2) as other:
        with pytest.raises(EngineError) as err:
            other.slot_load(0, good_path)
        assert err.value.code == "unsupported" and other.slot_tokens(0) == []
    # a context too small for the saved history
    with Engine(default_model, n_slots=1, n_ctx=4, n_threads=2) as small:
        with pytest.raises(EngineError) as err:
            small.slot_load(0, good_path)
        assert err.value.code == "too_long"


SAVER = r"""
import sys
from colibri.engine import Engine
e = Engine(sys.argv[1], n_slots=1, n_ctx=256, n_threads=1)
histories = [[e.bos] + [5 + i] * (40 + 30 * i) for i in range(3)]  # saved in turn, forever
print("ready", flush=True)
i = 0
while True:
    h = histories[i % 3]
    e.submit(0, h, max_tokens=0)
    while e.step():
        pass
    e.slot_save(0, sys.argv[2])
    i += 1
"""


def test_kill_during_saves_never_leaves_a_bad_file(tmp_path):
    model = moe_models.tiny("qwen3moe", "Q8_0")
    target = tmp_path / "slot-0.kv"
    rng = random.Random(7)
    valid = 0
    for round_ in range(25):
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(model), str(target)], stdout=subprocess.PIPE,
                                cwd=Path(__file__).resolve().parents[2])
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not target.exists():
            continue
        with Engine(model, n_slots=1, n_ctx=256, n_threads=1) as e:
            try:
                n = e.slot_load(0, target)
            except EngineError as err:  # refused by name, never loaded wrong
                assert err.code in ("truncated", "corrupt")
                assert e.slot_tokens(0) == []
                continue
            toks = e.slot_tokens(0)
            assert n == len(toks) and toks in ([e.bos] + [5 + i] * (40 + 30 * i) for i in range(3))
            valid += 1
    assert valid > 0
    # a save cut short leaves only its temporary file behind, never a half-written target
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != target.name]
    assert all(".tmp." in name for name in leftovers)
