"""Which kernel set computes each weight type on this CPU, chosen by measuring.

The engine's SIMD sets (AVX2, AVX-VNNI, AVX-512) give most weight types the same
bits (colibri_kernel_same_bits); which one is fastest depends on the core: Zen 4
runs 512-bit operations as two 256-bit halves and stalls on bursts of L1
prefetches, Intel's cores do not. At model load, each such type the model holds
(2% of its weights or more) is timed on a real slice of its weights (the first
routed expert where it has experts: decode's bulk), copied past the caches so
that it streams from memory as decode reads it, with every set this CPU runs at
each prefetch level (engine/src/prefetch.h). The level (one per process) and
the set each type decodes with that make the model's weights quickest are kept;
batches (prefill) keep the widest set, whose batch kernels are the fastest (a
call's set may change with its row count: each set gives the same bits). Timings are
cached per CPU model and engine build in cache_dir()/kernels.json, so a later
load measures nothing; `coli --version -v` shows them.

COLI_KERNELS: "calibrate" (default), "auto" (the widest set, no measuring), or a
set for everything ("avx2", "avxvnni", "avx512", "scalar": other bits for F32/F16
weights, as a llama.cpp built for that ISA).

The AVX-512 kernels of the grid i-quants (IQ2_*, IQ3_*) look their grid points up
by gathers or by scalar loads (the same results): the engine times both when it
starts (about a millisecond) and keeps the faster; COLI_KERNEL_LOOKUP=gather or
loads forces one.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import platform
import threading
import time
from pathlib import Path

from colibri import engine
from colibri.paths import cache_dir

log = logging.getLogger(__name__)

SETS = ("avx2", "avxvnni", "avx512")  # the SIMD sets a choice is made between
LEVELS = ("l1", "l2")  # where the kernels prefetch weights (engine/src/prefetch.h), the default first
MAX_ROWS = 1024  # rows of a sample: an expert's, or a slice of a big matrix
ROUNDS = 4  # passes over the streamed copies per variant, alternating; the fastest kept
MARGIN = 0.03  # another prefetch level or set must beat the default by this much: noise does not flip a choice
MIN_SHARE = 0.02  # types under this share of the file's weights are not timed (the default set stays)

_lock = threading.Lock()


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC 9R14 96-Core Processor"), what timings are cached by."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cache_path() -> Path:
    return cache_dir() / "kernels.json"


@functools.lru_cache(maxsize=1)
def build_key() -> str:
    """The engine version, its compile flags and a digest of the compiled engine:
    kernels change between builds of one version, and their timings with them."""
    from colibri import _engine
    try:
        digest = " " + hashlib.sha256(Path(_engine.__file__).read_bytes()).hexdigest()[:12]
    except (OSError, TypeError, AttributeError):  # no file to read (a frozen or in-memory build)
        digest = ""
    return f"{engine.version()} ({engine.build_info()}){digest}"


def read_cache() -> dict:
    try:
        data = json.loads(cache_path().read_text())
        return data if isinstance(data, dict) and isinstance(data.get("cpus"), dict) else {"cpus": {}}
    except (OSError, ValueError):
        return {"cpus": {}}


def cached_choices() -> dict:
    """This CPU's cached timings for this engine build: {"Q4_0 2048x768": {"us": {"avx2/l1": µs, ...}}}
    (none when the features differ: COLI_CPU_ISA hides some, and sets measured with them would not run)."""
    entry = read_cache()["cpus"].get(cpu_model()) or {}
    same = entry.get("engine") == build_key() and entry.get("features") in (None, engine.cpu_features())
    return entry.get("choices", {}) if same else {}


def _write_cache(choices: dict) -> None:
    data = read_cache()
    data["cpus"][cpu_model()] = {"engine": build_key(), "features": engine.cpu_features(), "choices": choices}
    path = cache_path()
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)  # two processes loading at once: each file whole
    except OSError as exc:
        log.info("kernel timings not cached (%s): %s", path, exc)


def samples(path: str | os.PathLike[str]) -> dict[str, tuple[str, int, int, int]]:
    """Per weight type the choice applies to: (tensor, n_in, rows, elements of the type in the file)
    of a representative weight: the first routed expert of an expert tensor, else the type's
    biggest matrix."""
    best: dict[str, tuple[int, int, str, int, int]] = {}
    total: dict[str, int] = {}
    with engine.GGUFFile(path) as g:
        for t in g.tensors():
            if len(t.shape) < 2 or not engine.kernel_same_bits(t.type):
                continue
            total[t.type] = total.get(t.type, 0) + math.prod(t.shape)
            rows = min(t.shape[1], MAX_ROWS)
            rank = (int("_exps" in t.name), t.nbytes)
            if t.type not in best or rank > best[t.type][:2]:
                best[t.type] = (*rank, t.name, t.shape[0], rows)
    return {ty: (name, n_in, rows, total[ty]) for ty, (_, _, name, n_in, rows) in best.items()}


def _runnable(default: str) -> list[str]:
    """The SIMD sets this CPU runs, the default first (set_type_isa refuses the others)."""
    out = [default]
    for isa in SETS:
        if isa != default and engine.kernel_set_runnable(isa):
            out.append(isa)
    return out


def _variants(sets: list[str]) -> list[tuple[str, str]]:
    return [(isa, level) for isa in sets for level in LEVELS]


def measure(path: str | os.PathLike[str], sample: tuple[str, int, int, int], sets: list[str]) -> dict:
    """Microseconds per decode-step product of the sample streamed from memory, for each set at
    each prefetch level (alternating): {"us": {"avx2/l1": µs, ...}}."""
    name, _, rows, _ = sample
    variants = _variants(sets)
    with engine.GGUFFile(path) as g:
        seconds = g.time_stream(name, rows, variants, ROUNDS)
    return {"us": {f"{isa}/{level}": round(s * 1e6, 2) for (isa, level), s in zip(variants, seconds)}}


def pick(timings: dict[str, dict[str, float]], weights: dict[str, float], sets: list[str]) -> tuple[str, dict[str, str]]:
    """The prefetch level (one for the process) and the set each type decodes with, from
    timings[type] = {"isa/level": µs} of decode. At a level, a type decodes with the set fastest
    there if it beats the default (the first, the widest, whose batch kernels every type keeps:
    they prefill fastest) by MARGIN; the level is the one where the types so chosen cost least,
    weighted by their share of the weights. The defaults ("l1", the first set) stay unless beaten
    by a margin: noise does not flip a choice."""
    def best(us: dict[str, float], level: str) -> str:
        fastest = min(sets, key=lambda isa: us[f"{isa}/{level}"])
        return fastest if us[f"{fastest}/{level}"] < us[f"{sets[0]}/{level}"] * (1 - MARGIN) else sets[0]

    def cost(level: str) -> float:
        return sum(weights[t] * us[f"{best(us, level)}/{level}"] for t, us in timings.items())

    level = LEVELS[0]
    for other in LEVELS[1:]:
        if timings and cost(other) < cost(level) * (1 - MARGIN):
            level = other
    return level, {t: best(us, level) for t, us in timings.items()}


def apply_lookup() -> None:
    """COLI_KERNEL_LOOKUP (gather, loads; unset or auto: the engine's own measurement)."""
    way = os.environ.get("COLI_KERNEL_LOOKUP", "").strip().lower()
    if way and way != "auto" and way != engine.kernel_lookup():
        try:
            engine.set_kernel_lookup(way)
        except engine.EngineError as exc:
            raise engine.EngineError(exc.code, f"COLI_KERNEL_LOOKUP={way}: {exc.message}") from None


def choose(path: str | os.PathLike[str]) -> str:
    """Apply COLI_KERNELS for the model at `path` before it is opened; the set in force after."""
    apply_lookup()
    mode = os.environ.get("COLI_KERNELS", "calibrate").strip().lower() or "calibrate"
    if mode not in ("calibrate", "auto"):
        try:
            engine.set_kernel_isa(mode)  # a forced set for everything
        except engine.EngineError as exc:
            raise engine.EngineError(exc.code, f"COLI_KERNELS={mode}: {exc.message}") from None
        engine.set_kernel_prefetch(LEVELS[0])
        return engine.kernel_isa()
    if mode == "auto":
        engine.set_kernel_prefetch(LEVELS[0])
        return engine.kernel_isa()
    default = engine.kernel_default_isa()
    if default not in SETS:
        return engine.kernel_isa()  # scalar (no SIMD): nothing to choose between
    sets = _runnable(default)
    with _lock:  # two models loading at once: one measures, the other then reads its cache
        return _choose(path, sets)


def _choose(path: str | os.PathLike[str], sets: list[str]) -> str:
    started = time.perf_counter()
    choices = cached_choices()
    measured = []
    try:
        found = samples(path)
    except engine.EngineError:
        return engine.kernel_isa()  # the open that follows names what is wrong with the file
    everything = sum(s[3] for s in found.values()) or 1
    want = {f"{isa}/{level}" for isa, level in _variants(sets)}
    timings, weights = {}, {}
    for type_name, sample in sorted(found.items()):
        if sample[3] < MIN_SHARE * everything:
            continue  # a type this small does not move a token's time: the default set stays
        key = f"{type_name} {sample[1]}x{sample[2]}"
        cached = choices.get(key)
        if not isinstance(cached, dict) or not isinstance(cached.get("us"), dict) or set(cached["us"]) != want:
            try:
                choices[key] = measure(path, sample, sets)
            except engine.EngineError as exc:  # a tensor the engine cannot take: its open will say so
                log.info("kernels for %s not measured: %s", type_name, exc)
                continue
            measured.append(key)
        timings[type_name] = choices[key]["us"]
        weights[type_name] = sample[3] / (sample[1] * sample[2])  # how many samples' worth the file holds
    level, isas = pick(timings, weights, sets)
    engine.set_kernel_prefetch(level)
    for type_name, isa in isas.items():
        try:
            engine.set_kernel_type_decode_isa(type_name, isa)
        except engine.EngineError as exc:  # a set this (virtual) CPU no longer runs: the default stays
            log.info("kernels for %s stay %s: %s", type_name, sets[0], exc)
    if measured:
        _write_cache(choices)
        log.info("kernels measured for %s in %.0f ms: %s", ", ".join(measured), 1e3 * (time.perf_counter() - started),
                 "; ".join(f"{k}: {describe(choices[k])}" for k in measured))
    log.info("kernels: %s, prefetch into %s", engine.kernel_isa(), level.upper())
    return engine.kernel_isa()


def describe(choice: dict) -> str:
    us = choice.get("us", {})
    if not us:
        return "no timings"
    fastest = min(us, key=us.get)
    return f"fastest {fastest} (" + ", ".join(f"{v} {t:g} µs" for v, t in sorted(us.items())) + ")"


def version_lines() -> list[str]:
    """`coli --version -v`: the set in force and this CPU's cached choices."""
    lines = [f"kernels: {engine.kernel_default_isa()} by default; COLI_KERNELS="
             f"{os.environ.get('COLI_KERNELS', 'calibrate')}; cache {cache_path()}"]
    if engine.kernel_set_runnable("avx2"):
        where = "IQ2/IQ3 on AVX-512" if engine.kernel_set_runnable("avx512") else "IQ2_S, IQ3 on AVX2"
        try:
            apply_lookup()
            loads, gather = engine.kernel_lookup_ns()
            how = (f" (a super-block {loads:.1f} ns by loads, {gather:.1f} ns by gathers, measured at start)"
                   if loads and gather else " (COLI_KERNEL_LOOKUP)")
        except engine.EngineError as exc:
            how = f" ({exc.message})"
        lines.append(f"grid i-quant lookups ({where}): {engine.kernel_lookup()}{how}")
    choices = cached_choices()
    if not choices:
        lines.append(f"  no timings cached for this CPU ({cpu_model()}) and engine build: a model's load measures them")
    for key, choice in sorted(choices.items()):
        lines.append(f"  {key}: {describe(choice)}")
    return lines
