"""How much slower than the machine the tests' time limits were set on this one runs them.

The limits that guard against hangs (a server's start, a child process, a terminal's screen, a client's
run) were set on a 2-core Xeon; an AVX2-only Zen 2 ran the suite 2.5x slower, and a busy CI machine can be
slower still. The helpers that hold those limits (tests/conftest.py run_coli, tests/sidecar/serve_support.py,
the terminal test's screen waits) scale them by `slowness()`: a short CPU workload of the engine and of
the interpreter, timed once per session (0.4 s) against the same workload's time on that Xeon. Only a hang
fails.
COLI_TEST_SLOWNESS=<factor> sets it instead (pytest's header shows the one in force).
"""
from __future__ import annotations

import functools
import os
import time

# The workloads' mean times on the 2-core Granite Rapids-class Xeon (KVM) where the limits were set.
BASELINE_S = {"python": 0.0115, "engine": 0.0038}
MAX_SLOWNESS = 8.0


def _python_work() -> None:
    total = 0
    for i in range(200_000):
        total += i * i % 7


@functools.lru_cache(maxsize=1)
def _engine_work():
    """16 Q8_0 matmuls of 1024 x 1024 weights by 8 rows on one thread, with the engine's widest kernels."""
    import numpy as np
    from colibri._engine import ffi, lib

    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 256, (1024 * 1024 // 32, 34), dtype=np.uint8)
    blocks[:, :2] = np.full(len(blocks), 0.01, np.float16).view(np.uint8).reshape(-1, 2)
    w = np.ascontiguousarray(blocks)
    x = np.ascontiguousarray(rng.standard_normal((8, 1024)).astype(np.float32))
    y = np.empty((8, 1024), np.float32)

    def run() -> None:  # the arrays are the closure's: the pointers cffi casts from them own nothing
        xp, yp = ffi.cast("float *", ffi.from_buffer(x)), ffi.cast("float *", ffi.from_buffer(y))
        for _ in range(16):
            assert lib.colibri_kernel_matmul(8, ffi.from_buffer(w), w.nbytes, 1024, 1024, xp, 8, yp, 1) == 0
    return run


def measured(span_s: float = 0.4) -> dict[str, float]:
    """Each workload's mean time here, in seconds, the two run in turn for span_s: a mean over a span, not a best
    run, so that a CPU shared with other work (a busy machine, a CPU quota's throttling) counts as slower."""
    work = {"python": _python_work, "engine": _engine_work()}
    spent, runs = dict.fromkeys(work, 0.0), dict.fromkeys(work, 0)
    start = time.perf_counter()
    while time.perf_counter() - start < span_s or min(runs.values()) < 3:
        for name, fn in work.items():
            t0 = time.perf_counter()
            fn()
            spent[name] += time.perf_counter() - t0
            runs[name] += 1
    return {name: spent[name] / runs[name] for name in work}


@functools.lru_cache(maxsize=1)
def slowness() -> float:
    """Time limits here are this many times those set on the baseline machine (1 .. MAX_SLOWNESS)."""
    forced = os.environ.get("COLI_TEST_SLOWNESS", "").strip()
    if forced:
        return min(max(float(forced), 1.0), MAX_SLOWNESS)
    times = measured()
    ratio = max(times[k] / BASELINE_S[k] for k in BASELINE_S)
    return round(min(max(ratio, 1.0), MAX_SLOWNESS), 2)


def scaled(seconds: float) -> float:
    """A time limit set on the baseline machine, for this one."""
    return seconds * slowness()
