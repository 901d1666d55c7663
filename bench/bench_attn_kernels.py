"""Decode attention's two many-head kernels alone, one core: P.V from the cached rows
(`pv_rows_f32a`, MLA's latent read in place) and the scores (`kq_rows_f32a`), in
GFMA/s for each kernel set this CPU runs, beside the one-row F16 dot they stand for
(the same bits; `colibri_kernel_pv` / `colibri_kernel_kq`, the tests' entry points).

    python bench/bench_attn_kernels.py [--sets avx2 avx512] [--sidecar DIR] [--reps 15]

--sidecar runs another checkout's engine (an A/B of two builds: run it once per build).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best_of(fn, reps: int, inner: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t) / inner)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=["avx2", "avx512"])
    ap.add_argument("--sidecar", default=os.path.join(ROOT, "sidecar"), help="the colibri package's parent folder")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    sys.path.insert(0, args.sidecar)
    from colibri._engine import ffi, lib
    from colibri.kernel_choice import cpu_model

    print(f"{cpu_model()}, one core, {args.sidecar}")
    rng = np.random.default_rng(0)
    u16 = lambda a: ffi.from_buffer("uint16_t[]", a.view(np.uint16))  # noqa: E731
    for isa in args.sets:
        if lib.colibri_kernel_set_isa(isa.encode()) != 0:
            print(f"{isa}: not on this CPU")
            continue
        for cells in (1024, 4096, 16384):
            n_d, nr, n = 512, 8, 576  # MLA: a 512-wide latent (+ 64 rope dims in K), 8 heads a call
            v = rng.standard_normal((cells, n_d)).astype(np.float16)
            p = rng.random((nr, cells)).astype(np.float16)
            k = rng.standard_normal((cells, n)).astype(np.float16)
            q = rng.standard_normal((nr, n)).astype(np.float16)
            out = np.zeros((nr, max(n_d, cells)), np.float32)
            fo = ffi.from_buffer("float[]", out)
            inner = max(1, 16384 // cells)
            line = [f"{isa} {cells:>5} cells"]
            for name, fmas, call in (
                ("P.V rows", cells * n_d * nr, lambda: lib.colibri_kernel_pv(cells, n_d, nr, u16(v), u16(p), fo, 0)),
                ("scores rows", cells * n * nr, lambda: lib.colibri_kernel_kq(n, cells, nr, u16(k), u16(q), fo, 1)),
                ("scores one-row", cells * n * nr, lambda: lib.colibri_kernel_kq(n, cells, nr, u16(k), u16(q), fo, 0)),
            ):
                if call() != 0:
                    line.append(f"{name} -")
                    continue
                line.append(f"{name} {fmas / best_of(call, args.reps, inner) / 1e9:5.1f}")
            print(" | ".join(line) + "  GFMA/s")
    lib.colibri_kernel_set_isa(b"auto")


if __name__ == "__main__":
    main()
